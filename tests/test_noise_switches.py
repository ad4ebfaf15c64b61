"""No module outside the ``pyro_ar/noise/`` package asks which noise family it was given.

What depends on the family is a method or property of :class:`pyro_ar.noise.Noise`
(``log_marginal``, ``icdf``, ``log_*_derivatives``, ``relaxed_log_prob``,
``closed_form``); a switch on the class or the name elsewhere (``isinstance(noise,
GumbelNoise)``, ``noise.name == "gumbel"``, a dict keyed by noise classes) would bring back
the copies this replaced. The test reads the source, so a lazy import cannot hide one.
"""

import pathlib
import re

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "pyro_ar"
#: the modules allowed to name families: the noise package (the base class, the families and
#: ``get_noise``'s name table, the distribution of any noise), and nothing else
NOISE_MODULES = sorted((PACKAGE / "noise").glob("*.py"))
FAMILY = r"(?:Gumbel|Normal|Logistic|Laplace|StudentT)Noise"
NAMES = r"""["'](?:gumbel|normal|logistic|laplace|probit|softmax|student_t\w*)["']"""
SWITCHES = [
    re.compile(rf"isinstance\(.*?\b{FAMILY}\b"),               # isinstance(get_noise(n), GumbelNoise)
    re.compile(r"\btype\([^)]*noise[^)]*\)(?!\.__name__)"),   # type(noise) is X, table[type(noise)]
    re.compile(rf"\b{FAMILY}\s*:"),                           # {NormalNoise: ...} dispatch tables
    re.compile(rf"\.name\s*(?:==|!=|in\b)"),                  # noise.name == "gumbel"
    re.compile(rf"(?:==|!=)\s*{NAMES}"),                      # name == "gumbel"
    re.compile(rf"{NAMES}\s*(?:==|!=)"),
]


def _switches(text):
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        if code.lstrip().startswith(">>>"):
            continue
        if any(pattern.search(code) for pattern in SWITCHES):
            yield number, line.strip()


def test_the_patterns_catch_the_switches_they_name():
    bad = ('if isinstance(model.noise, GumbelNoise):\nif info["noise"].name == "gumbel":\n'
           'if name == "normal":\n_DERIVATIVES = {NormalNoise: (f, g)}\nif type(model.noise) is X:\n'
           'd = TABLE.get(type(noise), None)\n')
    assert len(list(_switches(bad))) == 6
    good = ("if model.noise.closed_form:\nlp = noise.log_marginal(psi, y)\nrepr(noise.name)\n"
            "raise TypeError(f'got {type(noise).__name__}')\n")
    assert not list(_switches(good))


def test_no_noise_switch_outside_the_noise_package():
    names = [path.name for path in NOISE_MODULES]
    assert {"base.py", "families.py"} <= set(names), f"the noise package moved? found {names}"
    found = [f"{path.relative_to(PACKAGE)}:{n}: {line}"
             for path in sorted(PACKAGE.rglob("*.py")) if path not in NOISE_MODULES
             for n, line in _switches(path.read_text())]
    assert not found, "noise switches outside pyro_ar/noise/:\n" + "\n".join(found)

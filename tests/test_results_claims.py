"""``benchmarks/RESULTS.md`` is generated from the claim records, and every number the README,
the docs and the tutorials quote from a measurement is traceable to one.

Pages cite a claim as ``[claim <id>]`` (``benchmarks/results/claims/<id>.json``). The pages are
``README.md``, ``docs/*.rst``, the prose of the tutorials (``tutorials/NN_*.py``: their
Markdown cells, comments and docstrings, which the documentation build renders) and the API
reference (the docstrings of the public objects of the modules ``docs/api.rst`` renders). In a cited
paragraph or list item (a table inherits the citation of the paragraph above it), every
quoted measurement must be a rounding of a number of the cited records -- their cells,
notes or commands (signs aside: a gap of 0.23 nats is the table's -0.2314).

In the API reference, where docstrings state settings and defaults at every turn, the rule
reads only the units that say they report a measurement (:data:`REPORTS`: "measured", a
benchmark, CPU time, milliseconds, nats, accuracy, "faster", ...).

A quoted **measurement** is a decimal number (``0.81``, ``1.5e-14``) or a ratio (``0.81x``,
``32x``, ``3,400 times``); other integers, versions, and what inline code or math holds
(settings, commands, formulas) are not. The rule, on every page: a paragraph that quotes a
measurement cites a claim, unless this file lists it below as not a measurement, with the
reason (a setting, a data set's statistics, a run time). Where a tutorial prints a number
itself, its prose says so rather than quoting a run. A cited integer ratio is traced to its
last non-zero digit ("80x" fits 78).
"""

import ast
import io
import re
import tokenize
from decimal import Decimal
from pathlib import Path

import pytest

from benchmarks import report

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.py"))
AUTOMODULE = re.compile(r"^\.\. automodule:: ([\w.]+)\n((?:   :[\w-]+:.*\n)*)", re.M)


def api_modules():
    """The source files of the modules ``docs/api.rst`` renders -> whether with their members."""
    found = {}
    for name, options in AUTOMODULE.findall((ROOT / "docs" / "api.rst").read_text()):
        base = ROOT.joinpath(*name.split("."))
        path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        found[path] = ":no-members:" not in options
    return found


API = api_modules()
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.rst")) + TUTORIALS + sorted(API)
#: units (paragraphs, list items, tables) whose numbers are not benchmark measurements:
#: (page, as a path from the repository root, start of the unit) -> why
NOT_MEASURED_UNITS = {
    ("README.md", "Both do all set-up on a fresh machine"): "the size of the installed packages",
    ("docs/data.rst", "============================  =======  =======  ======"):
        "the data sets' versions and statistics (sizes, non-zeros per row), their provenance",
    ("docs/data.rst", "==================  ========================================"):
        "the fetchers' sources and download sizes",
    ("pyro_ar/datasets/wordnet.py", "With the defaults on the Debian package"):
        "the data set's version and statistics (sizes, non-zeros per row), its provenance",
}
#: numbers that are settings or facts, not measurements: (page, the exact text) -> why; the
#: text is taken out of its unit before the unit is checked
NOT_MEASURED = {
    ("docs/math.rst", "power 0.75"): "the proposal's exponent (word2vec's), a setting",
    ("tutorials/05_language_model.py", "2.9 MB"): "the size of the shipped corpus file (2,875,925 bytes)",
    ("README.md", "3.5 MB"): "the size of Bibtex's files, downloaded by fetch_bibtex",
    ("docs/install.rst", "3.5 MB"): "the size of Bibtex's files, downloaded by fetch_bibtex",
    ("tutorials/02_softmax_at_large_k.py", "3.5 MB"): "the size of Bibtex's files, downloaded by fetch_bibtex",
    ("tutorials/05_language_model.py", "lazy Adam 0.01"): "the step size, a setting",
    ("tutorials/05_language_model.py", "Adam 0.003"): "the step size, a setting",
    ("pyro_ar/infer/elbo.py", "about 1e-6 per term"):
        "the rule's error per term, asserted by tests/distributions/test_expected_factor.py",
}
#: words by which an API docstring's unit says it reports a measurement
REPORTS = re.compile(r"measured|benchmark|\bCPU\b|\bms\b|\bnats?\b|accuracy|faster|slower|\btook\b|\bfell\b",
                     re.I)
LITERAL_DIRECTIVES = (".. code-block::", ".. code::", ".. doctest::", ".. testcode::", ".. math::")
CITE = re.compile(r"\[claim ([a-z0-9][a-z0-9-]*)\]")
_INT = r"(?:\d{1,3}(?:,\d{3})+|\d+)"
#: a number, with thousands separators and an exponent; "2.4x" (a ratio) counts, "x2" or "v1.2" not
NUMBER = re.compile(r"(?<![\w.])[-−]?" + _INT + r"(?:\.\d+)?(?:e[-−]?\d+)?(?![\da-wyzA-Z_])")
#: a ratio: "0.81x", "32x", "3,400 times" (not "8 x 8", not "x0.9")
RATIO = re.compile(r"(?<![\w.,])(" + _INT + r"(?:\.\d+)?)(?:[x×](?![\w])|\s+times\b)")
#: inline code and math (``x``, `x`, :math:`x`, $x$): settings, commands and formulas, not quotes
MARKUP = re.compile(r":math:`[^`]*`|``[^`]*``|`[^`]*`|\$\$[^$]*\$\$|\$[^$\n]*\$")
VERSION = re.compile(r"\b(?:torch|pyro|Python|CUDA|python)\s+[\d.]+|\b\d+\.\d+\.\d+\b|>=\s*[\d.]+")


def units(text, markdown=True):
    """The paragraphs and list items of a page's text, code blocks left out; a table (markdown
    rows, an rst grid) is a unit of its own that inherits the citations of the unit before it."""
    out, block, in_fence, literal, doctest = [], [], False, False, False

    def flush():
        if block:
            out.append("\n".join(block))
            block.clear()

    for line in text.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
            flush()
            continue
        indented = line.startswith("    ") or line.startswith("\t")
        if in_fence or (literal and (line[:1].isspace() or not line.strip())):
            continue
        literal = False
        if line.lstrip().startswith(">>>"):
            flush()
            doctest = True  # a doctest block, up to the next blank line
        if not line.strip():
            doctest = False
            flush()
            continue
        if doctest:
            continue
        if line.lstrip().startswith(("* ", "- ")) or line.strip().startswith(".. "):
            flush()
        if markdown and indented and not block:
            continue  # an indented code block (a command)
        block.append(line)
        if line.rstrip().endswith("::") or line.strip().startswith(LITERAL_DIRECTIVES):
            flush()
            literal = True
    flush()
    return out


def tutorial_prose(path):
    """A tutorial's prose as Markdown: its Markdown cells and the comments of its code cells
    (``# `` stripped; each run of comment lines on consecutive lines a paragraph), then its
    docstrings. Cell markers (``# %%``) end a paragraph."""
    source = path.read_text()
    paragraphs, current, last = [], [], None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        row, text = tok.start[0], tok.string[1:]
        if current and (last is None or row != last + 1 or text.startswith(" %%")):
            paragraphs.append("\n".join(current))
            current = []
        last = row
        if not text.startswith(" %%"):
            current.append(text[1:] if text.startswith(" ") else text)
    if current:
        paragraphs.append("\n".join(current))
    tree = ast.parse(source)
    docs = [ast.get_docstring(n) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    return "\n\n".join(paragraphs + [d for d in docs if d])


def api_prose(path, members):
    """The docstrings of a module that the API reference renders: the module's, and with
    ``members`` those of its public classes and functions and of their public methods."""
    tree = ast.parse(path.read_text())
    nodes = [tree]
    if members:
        public = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and not n.name.startswith("_")]
        nodes += public + [m for c in public if isinstance(c, ast.ClassDef) for m in c.body
                           if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                           and (not m.name.startswith("_") or m.name == "__init__")]
    return "\n\n".join(d for d in map(ast.get_docstring, nodes) if d)


def page_units(path):
    """The units of a page: a Markdown or rst file, a tutorial's prose, a module's API docs."""
    if path in API:
        return units(api_prose(path, API[path]), markdown=False)
    if path.suffix == ".py":
        return units(tutorial_prose(path))
    return units(path.read_text(), markdown=path.suffix == ".md")


def _clean(text):
    return VERSION.sub(" ", MARKUP.sub(" ", CITE.sub(" ", text)).replace("−", "-"))


def numbers(text):
    """The decimal numbers quoted in ``text`` (not versions, not integers)."""
    return [m.group(0) for m in NUMBER.finditer(_clean(text)) if "." in m.group(0) or "e" in m.group(0)]


def measurements(text):
    """What ``text`` quotes as measured: its decimal numbers and its ratios (integer ones too)."""
    found = numbers(text)
    return found + [r for r in RATIO.findall(_clean(text)) if "." not in r]


def traceable(quoted, values):
    """``quoted`` (text) is a rounding of one of ``values`` (signs aside). A decimal is rounded
    to its last digit; an integer to its last non-zero digit (``3,400`` is 3,350-3,450)."""
    q = Decimal(quoted.replace(",", "").replace("−", "-")).copy_abs()
    if "." not in quoted and "e" not in quoted and q:
        q = q.normalize()
    exponent = q.as_tuple().exponent
    tolerance = Decimal(5) * Decimal(10) ** (exponent - 1) + Decimal("1e-12")
    return any(abs(v - q) <= tolerance for v in values)


def page_name(page):
    """A page's path from the repository root (the exemptions' key)."""
    return page.resolve().relative_to(ROOT).as_posix() if page.resolve().is_relative_to(ROOT) else page.name


def unit_is_measured(page, unit):
    """False for a unit listed in ``NOT_MEASURED_UNITS``, and for an API docstring's unit
    that does not say it reports a measurement."""
    if page in API and not REPORTS.search(MARKUP.sub(" ", unit)):
        return False
    return not any(unit.startswith(start) for (name, start) in NOT_MEASURED_UNITS if name == page_name(page))


def without_settings(page, unit):
    """The unit without the texts ``NOT_MEASURED`` lists for its page."""
    for (name, text) in NOT_MEASURED:
        if name == page_name(page):
            unit = unit.replace(text, " ")
    return unit


def check_page(page, claims, values=None):
    """The problems of a page: unknown claims, measurements that are not in the claims the
    unit cites, measurements in a unit that cites none."""
    problems, previous = [], []
    values = {} if values is None else values
    for unit in page_units(page):
        cited = CITE.findall(unit)
        is_table = unit.lstrip().startswith(("|", "=="))
        if not cited and is_table:
            cited = previous
        previous = cited
        unknown = [c for c in cited if c not in claims]
        if unknown:
            problems.append(f"cites unknown claims {unknown}: {unit[:100]!r}")
            continue
        if not unit_is_measured(page, unit):
            continue
        quoted = measurements(without_settings(page, unit))
        if not cited:
            if quoted:
                problems.append(f"quotes {quoted} without citing a claim: {unit[:160]!r}")
            continue
        pool = []
        for c in cited:
            if c not in values:
                text = report.claim_text(claims[c]).replace("−", "-")
                values[c] = [Decimal(n.replace(",", "")).copy_abs() for n in NUMBER.findall(text)]
            pool += values[c]
        missing = [q for q in quoted if not traceable(q, pool)]
        if missing:
            problems.append(f"{missing} not in {cited}: {unit[:160]!r}")
    return problems


@pytest.fixture(scope="module")
def claims():
    return {c["id"]: c for c in report.load_claims()}


def test_results_md_is_generated_from_the_records():
    assert (ROOT / "benchmarks" / "RESULTS.md").read_text() == report.render(), \
        "benchmarks/RESULTS.md is out of date: run python -m benchmarks.report"


def test_every_record_names_its_command_commit_and_machine(claims):
    for cid, claim in claims.items():
        runs = report.provenance(claim)
        assert runs and all(cmd and commit and commit != "?" for cmd, commit in runs), cid
        assert report.machine(claim), cid
        assert claim.get("source") or claim.get("runs"), cid
        headers, rows = report.table(claim)
        assert rows and all(len(r) == len(headers) for r in rows), cid


def test_run_keys_index_lists():
    """A dotted key reads dicts by name and lists by a part of digits (a curve's [step, value])."""
    run = {"rows": {"clgp": {"curve": [[2500, -6.7], [5000, -6.6]]}}}
    assert report._get(run, "rows.clgp.curve.1.0") == 5000
    assert report._get(run["rows"]["clgp"]["curve"][0], "1") == -6.7
    assert report._get(run, "rows.clgp.curve.2") is None and report._get(run, "rows.x.curve") is None


def test_run_keys_alternatives_and_differences():
    """``a|b`` reads ``b`` where ``a`` is missing; ``a - b`` subtracts (a gap to a reference row)."""
    run = {"rows": [{"guide": "teacher", "test_ll": -1.75}, {"guide": "fit", "test_ll": -1.875}]}
    fit, teacher = run["rows"][1], run["rows"][0]
    assert report._value(run, fit, "run.rows.0.test_ll - test_ll") == 0.125
    assert report._value(run, fit, "missing - test_ll") is None
    assert report._value(run, fit, "missing|guide") == "fit" and report._value(run, teacher, "guide|x") == "teacher"
    assert report._value(run, fit, "missing|run.rows.0.guide") == "teacher"


def test_a_transcribed_cell_differs_from_a_made_up_one(claims):
    """The number check below is not vacuous: a number in no record is reported."""
    values = [Decimal(v) for v in ("0.2656", "3.49", "1.14", "3414", "78")]
    assert traceable("0.27", [Decimal("0.2666")]) and traceable("3.49", values)
    assert not traceable("0.2661", values) and not traceable("2.5", values)
    assert traceable("3,400", values) and traceable("80", values) and traceable("78", values)
    assert not traceable("3,500", values) and not traceable("77", values)


def test_measurements_are_found_and_settings_are_not():
    text = ("costs 0.81x a plain loop, 32x more per step, 2,000–3,400 times faster, -5.245 nats, "
            "1.5e-14; not 8 x 8 digits, x0.9 every 2,000 steps, torch 2.13.0, K = 10,000, 20%")
    assert measurements(text) == ["0.81", "-5.245", "1.5e-14", "32", "3,400"]


def test_tutorial_prose_is_its_cells_comments_and_docstrings(tmp_path):
    script = tmp_path / "09_x.py"
    script.write_text('# %% [markdown]\n# # Title\n#\n# A ratio of 0.5x.\n#\n#     python x.py  # ~2.5 s\n'
                      '\n# %%\nx = "1.25x"  # a comment: 0.7x\n# next line\ny = 2\n\n\n'
                      'def f():\n    """Docstring: 0.9x."""\n')
    found = [measurements(u) for u in page_units(script)]
    assert found == [[], ["0.5"], ["0.7"], ["0.9"]], page_units(script)


def test_an_untraced_number_is_reported(tmp_path, claims):
    """The page check fails on a measurement without a citation, and on one its claim lacks."""
    page = tmp_path / "made_up.rst"
    page.write_text("A step costs 0.75x the plain loop [claim plain-loop].\n\n"
                    "A step costs 0.71x the plain loop [claim plain-loop].\n\n"
                    "A step costs 0.75x the plain loop, it was measured once.\n\n"
                    "Integers (20 steps) and settings are not measurements.\n")
    problems = check_page(page, claims)
    assert len(problems) == 2 and "['0.71'] not in" in problems[0] and "without citing" in problems[1]


def test_every_exemption_is_used():
    """No stale entry: every listed unit is still on its page and quotes a number the rule
    would read, and every listed text takes such a number out of a unit of its page."""
    by_name = {page_name(p): p for p in PAGES}
    for (name, start), why in NOT_MEASURED_UNITS.items():
        assert any(u.startswith(start) and measurements(u) for u in page_units(by_name[name])), (name, start, why)
    for (name, text), why in NOT_MEASURED.items():
        page = by_name[name]
        assert any(text in u and measurements(u) != measurements(without_settings(page, u))
                   for u in page_units(page)), (name, text, why)


def test_the_pages_are_found():
    """The page list is not vacuous: the API reference's modules, with and without members."""
    assert len(TUTORIALS) >= 8 and len(API) >= 60 and 0 < sum(not m for m in API.values()) < 10
    assert all(p.exists() for p in API)


@pytest.mark.parametrize("page", PAGES, ids=page_name)
def test_quoted_numbers_are_in_the_cited_claims(page, claims):
    problems = check_page(page, claims)
    assert not problems, f"{page_name(page)}:\n" + "\n".join(problems)


#: Claims that read no run file, with the reason (everything else is read from runs).
WITHOUT_RUNS = {"gpu": "tabulated from GPU runs made on a device copy of the tree (its base commit plus the "
                       "commits the record names); no GPU is lent here to re-run them"}


def test_every_claim_reads_runs_made_at_a_clean_commit(claims):
    """Issue 40: a claim's numbers come from benchmark runs (``runs``), and each run's
    ``environment`` names its commit and lists no uncommitted changes to the library."""
    import json

    assert set(WITHOUT_RUNS) <= set(claims)
    problems = []
    for cid, claim in claims.items():
        if cid in WITHOUT_RUNS:
            continue
        if not claim.get("runs"):
            problems.append(f"{cid}: no runs")
        for name in claim.get("runs") or ():
            env = json.loads((report.RUNS / name).read_text()).get("environment") or {}
            if not re.fullmatch(r"[0-9a-f]{7,40}", str(env.get("git_commit"))):
                problems.append(f"{cid}: {name} names no commit ({env.get('git_commit')!r})")
            elif env.get("pyro_ar_uncommitted_changes"):
                problems.append(f"{cid}: {name} was made with uncommitted changes")
    assert not problems, "\n".join(problems)

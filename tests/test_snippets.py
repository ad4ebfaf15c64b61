"""Every Python code block in README.md and in the docs runs as pasted.

Blocks are extracted from README.md (fenced ```python blocks) and from ``docs/*.rst``
(``.. code-block:: python`` blocks, and ``::`` literal blocks whose text is valid Python;
shell commands are not). Each block runs on its own in a fresh interpreter (no state from
another block): README blocks are pasted into the standard interactive interpreter
(``python -i`` reading the block from stdin, line by line with the REPL's rules: a
statement after an indented block needs a blank line first), the docs' blocks run as
``python -c``; both in a temporary working directory that holds small generated stand-ins for
the files the docs' examples read (a Mulan data set ``Corel5k-*`` and a ``book.txt``). A
block may opt out only with a line ``# not run by the tests: needs <data> not in the
repository``.
"""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP_MARK = "# not run by the tests:"


def markdown_blocks(path: Path) -> list:
    """The fenced ```python blocks of a Markdown file."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def rst_blocks(path: Path) -> list:
    """``code-block:: python`` blocks, and ``::`` literal blocks that parse as Python."""
    lines = path.read_text().splitlines()
    blocks = []
    for i, line in enumerate(lines):
        python = re.match(r"\s*\.\. code-block:: python\s*$", line) is not None
        literal = line.rstrip().endswith("::") and not line.lstrip().startswith("..")
        if not (python or literal):
            continue
        indent = len(line) - len(line.lstrip())
        body, j = [], i + 1
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
            body.append(lines[j])
            j += 1
        body = [b for b in body if not re.match(r"\s*:\w+:", b)]  # directive options
        text = _dedent("\n".join(body)).strip("\n")
        if not text:
            continue
        if literal:
            try:
                ast.parse(text)
            except SyntaxError:
                continue  # a shell command or other text
        blocks.append(text + "\n")
    return blocks


def _dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text)


def all_blocks() -> list:
    found = [(f"README.md[{i}]", b) for i, b in enumerate(markdown_blocks(ROOT / "README.md"), 1)]
    for rst in sorted((ROOT / "docs").glob("*.rst")):
        found += [(f"{rst.name}[{i}]", b) for i, b in enumerate(rst_blocks(rst), 1)]
    return found


BLOCKS = all_blocks()


def test_extraction_finds_the_blocks():
    """The extractors see the blocks that exist (a broken regex must not pass vacuously)."""
    names = [n for n, _ in BLOCKS]
    assert sum(n.startswith("README.md") for n in names) >= 4
    assert any(n.startswith("data.rst") for n in names) and any(n.startswith("index.rst") for n in names)
    assert all("pip install" not in b for _, b in BLOCKS)


def dotted_names(text: str) -> set:
    """The ``pyro_ar.a.b`` names in the inline code of Markdown or reST prose (code blocks left out)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    spans = re.findall(r"`+([^`\n]+)`+", text)
    return {m for s in spans for m in re.findall(r"(?<![\w.])pyro_ar(?:\.\w+)+", s)}


def test_pyro_ar_names_in_the_prose_resolve():
    """Every ``pyro_ar.x.Y`` that README.md or a docs page names in its text is a module or an
    attribute of one (a newcomer types what the text says)."""
    import importlib

    names = set().union(*(dotted_names(p.read_text()) for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.rst"))]))
    assert "pyro_ar.models.MAP" in names and len(names) > 20  # (the extraction sees them)
    unresolved = []
    for name in sorted(names):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
                break
            except ImportError:
                continue
        for part in parts[i:]:
            obj = getattr(obj, part, None)
        if obj is None:
            unresolved.append(name)
    assert not unresolved, unresolved


def write_example_files(folder: Path) -> None:
    """Small stand-ins for the files the docs' examples read (same names and formats)."""
    rng = np.random.default_rng(0)
    D, L = 20, 40
    header = ["@relation Corel5k"] + [f"@attribute f{j} {{0,1}}" for j in range(D)]
    header += [f"@attribute tag{k} {{0,1}}" for k in range(L)] + ["@data"]
    W = rng.normal(size=(D, L))
    for split, n in (("train", 400), ("test", 100)):
        x = (rng.random((n, D)) < 0.3).astype(int)
        y = x @ W + rng.gumbel(size=(n, L)) > 1.5
        rows = ["{" + ",".join(f"{j} 1" for j in np.flatnonzero(np.r_[xi, yi])) + "}" for xi, yi in zip(x, y)]
        (folder / f"Corel5k-{split}.arff").write_text("\n".join(header + rows) + "\n")
    (folder / "Corel5k.xml").write_text(
        "<labels>" + "".join(f'<label name="tag{k}"></label>' for k in range(L)) + "</labels>\n")
    words = [f"w{i}" for i in range(300)]
    p = 1.0 / np.arange(1, 301)
    sentences = [" ".join(rng.choice(words, size=rng.integers(3, 12), p=p / p.sum())) + "."
                 for _ in range(2_000)]
    (folder / "book.txt").write_text(" ".join(sentences) + "\n")


def run_pasted(code: str, cwd, repl: bool) -> tuple:
    """``(ok, output)`` of ``code`` pasted into a fresh interpreter: the interactive one
    (``python -q -i``, the block on stdin; it exits 0 whatever happens, so a traceback or a
    SyntaxError in its output is the failure) or ``python -c``."""
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [sys.executable, "-q", "-i"] if repl else [sys.executable, "-c", code]
    proc = subprocess.run(command, input=code if repl else None, cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    output = proc.stdout[-2000:] + "\n" + proc.stderr[-3000:]
    failed = proc.returncode != 0 or (repl and ("Traceback (most recent call last)" in proc.stderr
                                                or "SyntaxError" in proc.stderr))
    return not failed, output


def test_the_repl_paste_check_catches_what_a_script_accepts(tmp_path):
    """A statement right after a loop body runs as a script but is a SyntaxError in the REPL
    (the issue's README example); with the blank line it pastes cleanly."""
    bad, good = "for i in range(2):\n    x = i\nprint(x)\n", "for i in range(2):\n    x = i\n\nprint(x)\n"
    assert run_pasted(bad, tmp_path, repl=False)[0]
    ok, output = run_pasted(bad, tmp_path, repl=True)
    assert not ok and "SyntaxError" in output
    assert run_pasted(good, tmp_path, repl=True)[0]
    assert not run_pasted("1 / 0\n", tmp_path, repl=True)[0]  # a traceback


@pytest.mark.slow
@pytest.mark.parametrize("name, code", BLOCKS, ids=[n for n, _ in BLOCKS])
def test_block_runs_as_pasted(name, code, tmp_path):
    if SKIP_MARK in code:
        reason = code.split(SKIP_MARK, 1)[1].splitlines()[0].strip()
        assert "needs" in reason and "not in the repository" in reason, f"{name}: bad skip reason {reason!r}"
        pytest.skip(f"{name}: {reason}")
    write_example_files(tmp_path)
    ok, output = run_pasted(code, tmp_path, repl=name.startswith("README.md"))
    assert ok, f"{name} failed as pasted:\n{code}\n{output}"


def launch_commands(path: Path) -> list:
    """The single-machine ``torchrun --standalone`` commands of a page's bash blocks (lines
    joined at their backslashes), as argument lists."""
    import shlex

    text = re.sub(r"\\\n\s*", " ", path.read_text())
    return [shlex.split(line.strip()) for line in text.splitlines()
            if line.strip().startswith("torchrun --standalone")]


@pytest.mark.slow
def test_distributed_launch_commands_run_one_after_the_other(tmp_path):
    """docs/distributed.rst's torchrun commands, pasted one after the other (issue 25, item
    17: they shared one checkpoint path, so the second resumed the first's checkpoint and
    failed with a shape error). Run here as one process each (no torchrun: the script then
    runs as rank 0 of 1), scaled down (K = 1,000, 4 steps), the checkpoints moved to a
    temporary folder; then the first again, which resumes its own checkpoint."""
    commands = launch_commands(ROOT / "docs" / "distributed.rst")
    assert len(commands) >= 2
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1")
    for args in commands + commands[:1]:
        script = args.index("-m") + 1  # torchrun ... -m benchmarks.distributed ...
        argv = args[script + 1:]
        for flag, small in (("--num-classes", "1000"), ("--steps", "4")):
            argv[argv.index(flag) + 1] = small
        ck = argv.index("--checkpoint") + 1
        argv[ck] = str(tmp_path / Path(argv[ck]).name)
        argv += ["--num-data", "600", "--num-test", "50", "--batch", "64"]
        proc = subprocess.run([sys.executable, "-m", args[script], *argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stderr[-3000:]}"

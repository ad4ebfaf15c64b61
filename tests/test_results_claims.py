"""``benchmarks/RESULTS.md`` is generated from the claim records, and every number the README
and the docs quote from a benchmark is traceable to one.

Pages cite a claim as ``[claim <id>]`` (``benchmarks/results/claims/<id>.json``). In a cited
paragraph or list item (a table inherits the citation of the paragraph above it), every
decimal number must be a rounding of a number of the cited records -- their cells, notes or
commands (signs aside: a gap of 0.23 nats is the table's -0.2314). In ``README.md`` and
``docs/choosing.rst``, the pages of measured claims, a paragraph that quotes a decimal number
outside code must cite a claim.
"""

import re
from decimal import Decimal
from pathlib import Path

import pytest

from benchmarks import report

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.rst"))
#: pages whose every quoted decimal number must cite a claim
CLAIM_PAGES = {"README.md", "choosing.rst"}
#: paragraphs of the claim pages whose numbers are not benchmark measurements (start -> why)
NOT_CLAIMS = {
    "Both do all set-up on a fresh machine": "the size of the installed packages",
    "| tutorial | what it shows | run time": "the tutorials' run times (the test suite runs them)",
}
LITERAL_DIRECTIVES = (".. code-block::", ".. code::", ".. doctest::", ".. testcode::", ".. math::")
CITE = re.compile(r"\[claim ([a-z0-9][a-z0-9-]*)\]")
#: a number, with thousands separators and an exponent; "2.4x" (a ratio) counts, "x2" or "v1.2" not
NUMBER = re.compile(r"(?<![\w.])[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-−]?\d+)?(?![\da-wyzA-Z_])")
VERSION = re.compile(r"\b(?:torch|pyro|Python|CUDA|python)\s+[\d.]+|\b\d+\.\d+\.\d+\b|>=\s*[\d.]+")


def units(path):
    """The paragraphs and list items of a page, code blocks left out; a table (markdown rows, an
    rst grid) is a unit of its own that inherits the citations of the unit before it."""
    text, out, block, in_fence, literal = path.read_text(), [], [], False, False

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
        if not line.strip():
            flush()
            continue
        if line.lstrip().startswith(("* ", "- ")) or line.strip().startswith(".. "):
            flush()
        if path.suffix == ".md" and indented and not block:
            continue  # an indented code block (a command)
        block.append(line)
        if line.rstrip().endswith("::") or line.strip().startswith(LITERAL_DIRECTIVES):
            flush()
            literal = True
    flush()
    return out


def numbers(text):
    """The decimal numbers quoted in ``text`` (not versions, not integers)."""
    text = VERSION.sub(" ", text.replace("−", "-"))
    return [m.group(0) for m in NUMBER.finditer(text) if "." in m.group(0) or "e" in m.group(0)]


def traceable(quoted, values):
    """``quoted`` (text) is a rounding of one of ``values`` (signs aside)."""
    q = Decimal(quoted.replace(",", "").replace("−", "-")).copy_abs()
    exponent = q.as_tuple().exponent
    tolerance = Decimal(5) * Decimal(10) ** (exponent - 1) + Decimal("1e-12")
    return any(abs(v - q) <= tolerance for v in values)


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


def test_a_transcribed_cell_differs_from_a_made_up_one(claims):
    """The number check below is not vacuous: a number in no record is reported."""
    values = [Decimal(v) for v in ("0.2656", "3.49", "1.14")]
    assert traceable("0.27", [Decimal("0.2666")]) and traceable("3.49", values)
    assert not traceable("0.2661", values) and not traceable("2.5", values)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_quoted_numbers_are_in_the_cited_claims(page, claims):
    problems, previous = [], []
    values = {}
    for unit in units(page):
        cited = CITE.findall(unit)
        is_table = unit.lstrip().startswith(("|", "=="))
        if not cited and is_table:
            cited = previous
        previous = cited
        unknown = [c for c in cited if c not in claims]
        if unknown:
            problems.append(f"cites unknown claims {unknown}: {unit[:100]!r}")
            continue
        quoted = numbers(CITE.sub(" ", unit))
        if not cited:
            if quoted and page.name in CLAIM_PAGES and not unit.startswith(tuple(NOT_CLAIMS)):
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
    assert not problems, f"{page.name}:\n" + "\n".join(problems)

"""The two test tiers and the CI script agree with README.md.

README's test command runs the default tier (``pyproject.toml`` deselects ``slow``);
``.ci/run`` runs that command verbatim, then the slow tier (``-m slow``).
"""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def readme_command(title: str) -> str:
    """The indented command block that follows README's bold ``title`` paragraph."""
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"\*\*{re.escape(title)}\*\*.*?\n\n    (\S[^\n]*)\n", text, flags=re.S)
    assert match, f"README.md has no command block after **{title}**"
    return match.group(1)


def test_ci_runs_readme_test_command_verbatim_and_then_the_slow_tier():
    command = readme_command("Tests")
    assert command.startswith("bash scripts/bootstrap.sh && ") and "pytest" in command, command
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert command in lines, f".ci/run does not run README's test command {command!r}"
    after = lines[lines.index(command) + 1:]
    assert any(re.search(r"-m pytest .*-m slow\b", line) for line in after), \
        ".ci/run does not run the slow tier (-m slow) after the default tier"


def test_default_tier_deselects_the_slow_tier():
    if sys.version_info < (3, 11):
        pytest.skip("tomllib is Python 3.11+")
    import tomllib

    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "-m 'not slow'" in options["addopts"] and "--strict-markers" in options["addopts"]
    assert any(m.startswith("slow:") and "-m slow" in m for m in options["markers"])

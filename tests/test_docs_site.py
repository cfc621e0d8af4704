"""The documentation site builds with warnings as errors (``mkdocs build --strict``), so CI builds it.

mkdocs.yml sets the site over docs/ (README.md as its home page, CHANGELOG.md as its changelog,
mkdocs_hooks.py), and mkdocstrings writes the API reference from the docstrings. A broken link, a
page missing from the nav, a docstring that does not render, or a module that does not load fails
the build; the failure message lists the build's warning lines. The extra ``docs`` (in ``test``)
brings mkdocs and mkdocstrings.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _mkdocs() -> list[str]:
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None and shutil.which("mkdocs") is None:
        pytest.fail("mkdocs is not installed: pip install -e '.[test]' (or '.[docs]') brings it")
    return [sys.executable, "-m", "mkdocs"]


def _problems(log: str) -> list[str]:
    """The build's WARNING and ERROR lines, each with its indented continuation lines."""
    out: list[str] = []
    keep = False
    for line in log.splitlines():
        if line.startswith(("WARNING", "ERROR")) or "Aborted" in line:
            keep = True
        elif not line.startswith((" ", "\t")):
            keep = False
        if keep:
            out.append(line)
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [*_mkdocs(), "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    log = done.stdout + done.stderr
    problems = _problems(log)
    assert done.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(problems or log.splitlines()[-40:])
    assert not problems, "\n".join(problems)
    return out


def test_the_api_reference_is_generated_from_the_docstrings(site: Path) -> None:
    page = (site / "api" / "evaluate" / "index.html").read_text(encoding="utf-8")
    assert 'id="cxreval.evaluate.evaluate"' in page and 'id="cxreval.evaluate.Evaluator"' in page
    assert "Functional form of" in page  # evaluate()'s docstring
    reward = (site / "api" / "reward" / "index.html").read_text(encoding="utf-8")
    assert 'id="cxreval.reward.ClinicalReward"' in reward


def test_the_home_page_is_the_readme_and_the_changelog_is_included(site: Path) -> None:
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "A five-minute tour" in home and 'href="cli/"' in home  # README's docs/cli.md, as a page link
    changelog = (site / "changelog" / "index.html").read_text(encoding="utf-8")
    assert 'id="rule-engine-history-rules1-to-rules32"' in changelog

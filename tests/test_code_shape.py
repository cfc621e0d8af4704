"""The shape the code promises: no function of the rule engine (``src/cxreval/extract``) above
cyclomatic complexity 15 by ruff's C901 (the mccabe count), so each rule stays small enough to read."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_COMPLEXITY = 15


def test_no_function_of_the_engine_is_above_the_complexity_limit() -> None:
    ruff = shutil.which("ruff") or shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]' brings it)")
    done = subprocess.run(
        [
            ruff,
            "check",
            "--no-cache",
            "--isolated",
            "--select",
            "C901",
            "--config",
            f"lint.mccabe.max-complexity={MAX_COMPLEXITY}",
            "--output-format",
            "concise",
            str(ROOT / "src" / "cxreval" / "extract"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, f"functions above complexity {MAX_COMPLEXITY}:\n{done.stdout}{done.stderr}"

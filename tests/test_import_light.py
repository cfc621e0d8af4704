"""``import cxreval`` and the CLI's start-up load no heavy dependency (issue 12: fast start)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pandas", "scipy", "openai", "anthropic", "pyarrow", "sacrebleu", "torch")


def _loaded(code: str) -> set[str]:
    probe = f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=600).stdout
    return {m.split(".")[0] for m in json.loads(out.splitlines()[-1])}


def test_import_cxreval_is_light() -> None:
    assert not _loaded("import cxreval") & set(HEAVY)


def test_cli_start_is_light() -> None:
    loaded = _loaded("import cxreval.cli")
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_lazy_names_still_work() -> None:
    import cxreval
    from cxreval.cli import example_path

    result = cxreval.evaluate(cxreval.read_pairs(example_path()))
    assert result.n_pairs == 20 and isinstance(cxreval.Evaluator(), cxreval.Evaluator)
    from cxreval.evaluate import summarize_runs

    assert summarize_runs([result])["runs"] == 1

"""Optional extras (issue 12): without the package an extra brings, the feature that needs it
stops with an error naming the extra, and everything else works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cxreval.io import InputError, read_pairs

_HIDE = "import sys; sys.modules[{name!r}] = None\n"  # `import name` now raises ImportError


def _run(code: str, hide: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _HIDE.format(name=hide) + code], capture_output=True, text=True, timeout=120)


def test_parquet_without_pyarrow_names_the_file_and_the_extra(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    path = tmp_path / "pairs.parquet"
    pq.write_table(pa.table({"id": ["1"], "reference": ["No effusion."], "candidate": ["Small effusion."]}), path)
    assert [p.pair_id for p in read_pairs(path)] == ["1"]  # with pyarrow: read
    code = (
        "from cxreval.io import InputError, read_pairs\n"
        f"try:\n    read_pairs({str(path)!r})\nexcept InputError as e:\n    print(e)\n"
    )
    out = _run(code, "pyarrow.parquet")
    assert out.returncode == 0, out.stderr
    assert str(path) in out.stdout and "cxreval[parquet]" in out.stdout
    assert issubclass(InputError, ValueError)


@pytest.mark.parametrize("provider,package", [("openai", "httpx2"), ("anthropic", "httpx2")])
def test_llm_engine_without_its_sdk_names_the_extra(provider: str, package: str) -> None:
    code = (
        "from cxreval import Evaluator\nfrom cxreval.llm import LLMConfig\n"
        f"cfg = LLMConfig(provider={provider!r}, base_url='http://127.0.0.1:9/v1', model='m', local_only=True)\n"
        "try:\n    Evaluator(engine='llm-pairwise', llm=cfg)\nexcept ValueError as e:\n    print('ERR', e)\n"
        "from cxreval.io import ReportPair\n"
        "r = Evaluator().evaluate([ReportPair(pair_id='1', reference='Small effusion.', candidate='No effusion.')])\n"
        "print('RULES', int(r.errors.loc['1', 'errors']))\n"
    )
    out = _run(code, package)
    assert out.returncode == 0, out.stderr
    assert f"ERR the {provider} backend needs the {package!r} package" in out.stdout
    assert "cxreval[llm]" in out.stdout
    assert "RULES 1" in out.stdout  # the offline engine needs no extra

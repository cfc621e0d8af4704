"""The Ray executor (issue 14): the same chunks judged by Ray actors write byte-identical files.

One local cluster of two CPUs serves the module (about 10 s to start and stop on 2 cores); the
CLI test starts its own in its subprocess. Without the ``ray`` extra everything here skips but
the missing-extra error, which is simulated in a subprocess where ``import ray`` fails.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cxreval import Evaluator
from cxreval.io import ReportPair
from cxreval.streaming import evaluate_stream, evaluate_systems_to, evaluate_to
from cxreval.testing.results import RESULT_FILES, differing, judgement_lines
from tests.test_streaming import _many_pairs

FILE_NAMES = (*RESULT_FILES, "judgements.parquet")
SYSTEMS = ("sys-a", "sys-b")
N_PAIRS = 2_500


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[object]:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        yield ray
    finally:
        ray.shutdown()


def _same_files(a: Path, b: Path) -> None:
    assert not differing(a, b, FILE_NAMES), f"files differ between {a} and {b}"


def test_ray_writes_the_files_the_local_workers_write(tmp_path: Path, ray_cluster: object) -> None:
    """2,500 pairs, two systems interleaved, three chunks each: local workers and Ray alike."""
    pairs = _many_pairs(N_PAIRS)
    local = {s: tmp_path / "local" / s for s in SYSTEMS}
    on_ray = {s: tmp_path / "ray" / s for s in SYSTEMS}
    by_local = evaluate_systems_to(Evaluator(workers=2), local, iter(pairs), total=len(pairs))
    by_ray = evaluate_systems_to(Evaluator(workers=2), on_ray, iter(pairs), total=len(pairs), executor="ray")
    for system in SYSTEMS:
        _same_files(local[system], on_ray[system])
        assert by_ray[system].to_dict() == by_local[system].to_dict()
    assert list(by_ray) == list(SYSTEMS)
    assert _free_cpus(ray_cluster) == 2, "the run's actors are still alive"
    assert ray_cluster.is_initialized(), "a cluster the caller started is left running"  # type: ignore[attr-defined]


def test_one_folder_and_one_actor_give_the_same_files(tmp_path: Path, ray_cluster: object) -> None:
    pairs = [p.model_copy(update={"system": None}) for p in _many_pairs(N_PAIRS)]
    evaluate_to(Evaluator(), tmp_path / "here", pairs)
    evaluate_to(Evaluator(workers=1), tmp_path / "ray", iter(pairs), executor="ray")
    _same_files(tmp_path / "here", tmp_path / "ray")


def test_ray_actors_read_with_the_users_rules(tmp_path: Path, ray_cluster: object) -> None:
    """A rule file's rule set travels to the actors: the files are those judged here, rule ids included."""
    from tests.test_explain import LOCAL_RULES, PAIRS

    rules = tmp_path / "local-rules.yaml"
    rules.write_text(LOCAL_RULES, encoding="utf-8")
    pairs = [ReportPair(pair_id=f"{n}-{i}", reference=r, candidate=c) for n in range(3) for i, r, c in PAIRS]
    here = evaluate_to(Evaluator(rules=rules), tmp_path / "here", pairs)
    on_ray = evaluate_to(Evaluator(rules=rules, workers=1), tmp_path / "ray", iter(pairs), executor="ray")
    _same_files(tmp_path / "here", tmp_path / "ray")
    assert str(on_ray.signature) == str(here.signature) and ".u" in here.signature.engine
    assert any(r.get("candidate_rules") == "local.pnx; negation.pre 'no'" for r in judgement_lines(tmp_path / "ray"))


def test_ray_reads_the_input_a_bounded_way_ahead(tmp_path: Path, ray_cluster: object) -> None:
    """At most two chunks per actor are out: the input is read as results come back."""
    pairs = [p.model_copy(update={"system": None}) for p in _many_pairs(2_000)]
    read = 0
    written: list[int] = []

    def counted() -> Iterator[ReportPair]:
        nonlocal read
        for p in pairs:
            read += 1
            yield p

    from cxreval.streaming import ResultWriter

    add = ResultWriter.add

    def spy(self: ResultWriter, chunk: object) -> None:
        written.append(read)
        add(self, chunk)  # type: ignore[arg-type]

    ResultWriter.add = spy  # type: ignore[method-assign]
    try:
        evaluate_stream(
            Evaluator().judge_engine,
            counted(),
            tmp_path / "out",
            workers=2,  # type: ignore[arg-type]
            chunk_pairs=100,
            executor="ray",
        )
    finally:
        ResultWriter.add = add  # type: ignore[method-assign]
    assert len(written) == 20
    # when the first chunk is written, 2 actors x 2 chunks were handed out (and one more read)
    assert written[0] <= 5 * 100 + 1, written


def test_an_error_in_the_stream_kills_the_actors_and_keeps_no_result(tmp_path: Path, ray_cluster: object) -> None:
    ray = ray_cluster
    pairs = [p.model_copy(update={"system": None}) for p in _many_pairs(3_000)]

    def interrupted() -> Iterator[ReportPair]:
        for i, p in enumerate(pairs):
            if i == 2_500:
                raise KeyboardInterrupt
            yield p

    with pytest.raises(KeyboardInterrupt):
        evaluate_to(Evaluator(workers=2), tmp_path / "out", interrupted(), executor="ray")
    assert not (tmp_path / "out" / "scores.json").exists()
    assert _free_cpus(ray) == 2, "the run's actors (one CPU each) are still alive"


def _free_cpus(ray: object, wait: float = 20.0) -> float:
    """The cluster's free CPUs once the killed actors have given theirs back (or ``wait`` s passed)."""
    deadline = time.monotonic() + wait
    while True:
        free = ray.available_resources().get("CPU", 0.0)  # type: ignore[attr-defined]
        if free >= 2 or time.monotonic() > deadline:
            return free
        time.sleep(0.2)


def test_a_ray_address_needs_the_ray_executor(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ray_address applies to executor 'ray'"):
        evaluate_to(Evaluator(), tmp_path / "out", _many_pairs(3), ray_address="auto")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cxreval", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "COLUMNS": "100", **(env or {})},
    )


def test_the_cli_executor_ray_end_to_end(tmp_path: Path) -> None:
    """``--executor ray`` starts a local cluster of --workers CPUs, writes what local writes, stops it."""
    pytest.importorskip("ray")
    pairs = _many_pairs(N_PAIRS)
    path = tmp_path / "pairs.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "reference", "candidate", "site", "model"])
        w.writerows((p.pair_id, p.reference, p.candidate, p.meta["site"], p.system) for p in pairs)
    common = ["evaluate", "--pairs", str(path), "--meta-col", "site", "--system-col", "model", "--workers", "2", "--json"]
    local = _cli(*common, "--out", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    on_ray = _cli(*common, "--out", str(tmp_path / "ray"), "--executor", "ray")
    assert on_ray.returncode == 0, on_ray.stderr
    assert json.loads(on_ray.stdout) == json.loads(local.stdout)
    for system in SYSTEMS:
        _same_files(tmp_path / "local" / "systems" / system, tmp_path / "ray" / "systems" / system)
    assert (tmp_path / "ray" / "systems.csv").read_bytes() == (tmp_path / "local" / "systems.csv").read_bytes()


def test_the_cli_refuses_ray_for_an_llm_engine_and_contradictory_options(tmp_path: Path) -> None:
    llm = _cli("evaluate", "--example", "--out", str(tmp_path / "a"), "--engine", "llm-extract", "--executor", "ray")
    assert llm.returncode == 2 and "--executor ray applies to the rule engine" in llm.stderr, llm.stderr
    both = _cli("evaluate", "--example", "--out", str(tmp_path / "b"), "--executor", "local", "--ray-address", "auto")
    assert both.returncode == 2 and "--ray-address applies to --executor ray" in both.stderr, both.stderr
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").iterdir())


_NO_RAY = "import sys; sys.modules['ray'] = None\n"


def test_without_the_extra_the_error_names_it(tmp_path: Path) -> None:
    """``import ray`` fails (a ``None`` entry in sys.modules): the CLI exits 2 naming the extra,
    and the API raises a ValueError that names it too."""
    cli = _NO_RAY + (
        f"from cxreval.cli import app\napp(['evaluate', '--example', '--out', {str(tmp_path / 'cli')!r}, '--executor', 'ray'])"
    )
    run = subprocess.run(
        [sys.executable, "-c", cli],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert run.returncode == 2, run.stderr
    assert "optional extra 'ray': pip install 'cxreval[ray]'" in run.stderr, run.stderr
    api = _NO_RAY + (
        "from cxreval import Evaluator, ReportPair\n"
        "from cxreval.streaming import evaluate_to\n"
        "pairs = [ReportPair(pair_id='1', reference='No effusion.', candidate='Effusion.')]\n"
        "try:\n"
        f"    evaluate_to(Evaluator(), {str(tmp_path / 'api')!r}, pairs, executor='ray')\n"
        "except ValueError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", api], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.startswith("RayUnavailable ") and "pip install 'cxreval[ray]'" in out, out
    assert not (tmp_path / "api" / "scores.json").exists()


def test_bench_config_takes_the_executor(tmp_path: Path) -> None:
    from cxreval.bench.config import EngineConfig

    assert not EngineConfig().on_ray
    assert EngineConfig(ray_address="auto").on_ray and EngineConfig(executor="ray").on_ray
    with pytest.raises(ValueError, match="ray_address applies to executor: ray"):
        EngineConfig(executor="local", ray_address="auto")
    with pytest.raises(ValueError, match="executor: ray applies to the rules engine"):
        EngineConfig(name="llm-extract", executor="ray")


def test_bench_judges_on_ray_what_it_judges_locally(tmp_path: Path, ray_cluster: object) -> None:
    from cxreval.bench.config import BenchConfig
    from cxreval.bench.runner import run_benchmark

    pairs = [p for p in _many_pairs(2_400) if p.system == "sys-a"]
    refs, cands = tmp_path / "refs.csv", tmp_path / "cands.csv"
    for path, col in ((refs, "reference"), (cands, "candidate")):
        with path.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["id", "report"])
            w.writerows((p.pair_id, getattr(p, col)) for p in pairs)

    def config(out: Path, **engine: object) -> BenchConfig:
        return BenchConfig.model_validate(
            {
                "name": "ray",
                "out": str(out),
                "metrics": ["spec-errors"],
                "bootstrap": {"resamples": 0},
                "engine": {"workers": 2, **engine},
                "datasets": [{"name": "d", "references": {"path": str(refs)}}],
                "systems": [{"name": "s", "path": str(cands)}],
            }
        )

    local, _ = run_benchmark(config(tmp_path / "local"))
    on_ray, stats = run_benchmark(config(tmp_path / "ray", executor="ray"))
    assert stats.judged > 0
    strip = {"timings", "created"}
    assert on_ray.model_dump(exclude=strip) == local.model_dump(exclude=strip)

"""IU X-ray train-split baselines (random report, retrieval oracle, label noise) and their bench kind.

Unit tests run on a small IU-shaped folder the test writes (its own text, not IU's); the last
test reads ../shared/data when it is there.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from cxreval.bench.config import BenchConfig, load_config, resolve_paths
from cxreval.bench.runner import load_candidates, run_benchmark
from cxreval.datasets.baselines import (
    Pool,
    baseline_reports,
    iu_uid,
    jaccard,
    noisy_findings,
    study_rng,
)
from cxreval.io import InputError
from cxreval.scores import Signature
from tests.conftest import shared_data_dir

TRAIN = [
    # uid, MeSH, findings (our own text)
    ("1", "normal", "Heart size is normal. The lungs are clear."),
    ("2", "normal", "No acute cardiopulmonary abnormality. Lungs are clear."),
    ("3", "Cardiomegaly", "Cardiomegaly. The lungs are clear."),
    ("4", "Pleural Effusion/right", "Right pleural effusion. Heart size is normal."),
    ("5", "Cardiomegaly;Pleural Effusion/left", "Cardiomegaly. Left pleural effusion."),
    ("6", "Pulmonary Atelectasis/base/left", "Left basilar atelectasis."),
    ("7", "Pneumothorax;Scoliosis", "Small right pneumothorax. Scoliosis."),
    ("8", "Cardiomegaly", ""),  # no findings section: never retrieved for findings
]
STUDIES = [
    # uid, MeSH, reference findings (our own text)
    ("101", "Cardiomegaly", "Cardiomegaly. No pleural effusion."),
    ("102", "normal", "The lungs are clear. No pneumothorax."),
    ("103", "Cardiomegaly;Pleural Effusion/right;Scoliosis", "Cardiomegaly. Right pleural effusion. Scoliosis."),
    ("104", "Pneumothorax", "Right pneumothorax."),
    ("105", "No Indexing", "Lungs are clear."),
    ("4", "Pleural Effusion/right", "Right pleural effusion."),  # a train study that is also benchmarked
]
IDS = [f"CXR{uid}_IM-{k:04d}" for k, (uid, _, _) in enumerate(STUDIES)]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    iu = tmp_path / "data" / "iu-xray"
    iu.mkdir(parents=True)
    with (iu / "indiana_reports.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["uid", "MeSH", "findings", "impression"])
        for uid, mesh, findings in TRAIN + [s for s in STUDIES if s[0] != "4"]:  # uid 4: its train row
            w.writerow([uid, mesh, findings, "Impression text."])
    splits = iu.parent / "radrestruct-template"
    splits.mkdir()
    (splits / "train_ids.json").write_text(json.dumps([u for u, _, _ in TRAIN]))
    (splits / "val_ids.json").write_text(json.dumps([]))
    (splits / "test_ids.json").write_text(json.dumps([u for u, _, _ in STUDIES if u != "4"]))
    return iu.parent


def _text(uid: str) -> str:
    return next(f for u, _, f in TRAIN if u == uid)


def test_helpers() -> None:
    assert iu_uid("CXR3030_IM-1405") == "3030" and iu_uid("3030") == "3030" and iu_uid(" 12 ") == "12"
    assert jaccard(frozenset(), frozenset()) == 1.0
    assert jaccard(frozenset("ab"), frozenset("bc")) == pytest.approx(1 / 3)
    a, b = study_rng(0, "x", "s").random(3), study_rng(0, "x", "s").random(3)
    assert np.array_equal(a, b) and not np.array_equal(a, study_rng(1, "x", "s").random(3))


def test_oracle_exact_nearest_uncoded_and_self_exclusion(data_dir: Path) -> None:
    out = baseline_reports("retrieval-oracle", IDS, data_dir, seed=0)
    by = dict(zip(IDS, out.source_uids))
    assert by[IDS[0]] == "3"  # the only train report coded exactly {cardiomegaly} with findings
    assert by[IDS[1]] in {"1", "2"}  # coded normal: a normal train report
    assert by[IDS[2]] == "5"  # {cm, effusion, scoliosis}: Jaccard 2/3 with {cm, effusion}, the maximum
    assert by[IDS[3]] == "7"  # {pneumothorax}: Jaccard 1/2 with {pneumothorax, scoliosis}
    # uid 4 is benchmarked: its own report is not in the pool; the nearest is {cm, effusion} (1/2)
    assert by[IDS[5]] == "5" and "4" not in out.source_uids
    assert "8" not in out.source_uids  # empty findings section
    assert (out.exact, out.nearest, out.uncoded) == (2, 3, 1)
    assert out.texts == [_text(u) for u in out.source_uids]
    sig = Signature.parse(str(out.signature))
    assert sig.metric == "baseline:retrieval-oracle" and sig.options["seed"] == "0" and sig.options["pool"] == "6"
    assert "retrieval-oracle on d: 6 train-split reports (2 exact" in out.note("retrieval-oracle", "d")


def test_seeded_ties_and_order_independence(data_dir: Path) -> None:
    normal = {baseline_reports("retrieval-oracle", IDS, data_dir, seed=s).source_uids[1] for s in range(20)}
    assert normal == {"1", "2"}  # the tie between the two normal reports goes both ways over seeds
    a = baseline_reports("retrieval-oracle", IDS, data_dir, seed=3)
    b = baseline_reports("retrieval-oracle", IDS[::-1], data_dir, seed=3)
    assert a.source_uids == b.source_uids[::-1]
    r1 = baseline_reports("random-train", IDS, data_dir, seed=1)
    assert r1.source_uids == baseline_reports("random-train", IDS, data_dir, seed=1).source_uids
    draws = {u for s in range(10) for u in baseline_reports("random-train", IDS, data_dir, seed=s).source_uids}
    assert draws == {"1", "2", "3", "5", "6", "7"}  # every pool report (not 4: benchmarked; not 8: empty)
    with pytest.raises(ValueError, match="noise applies to retrieval-oracle"):
        baseline_reports("random-train", IDS, data_dir, noise=0.1)


def test_label_noise_model() -> None:
    prevalence = {"a": 0.5, "b": 0.1, "c": 0.0}
    rng = np.random.default_rng(0)
    assert noisy_findings(frozenset("ab"), prevalence, 0.0, rng) == frozenset("ab")
    assert noisy_findings(frozenset("ab"), prevalence, 1.0, rng) == frozenset()  # everything present drops
    n, p = 20_000, 0.3
    draws = [noisy_findings(frozenset("a"), prevalence, p, np.random.default_rng(i)) for i in range(n)]
    kept = sum("a" in d for d in draws) / n
    added_b = sum("b" in d for d in draws) / n
    assert kept == pytest.approx(1 - p, abs=0.015)
    assert added_b == pytest.approx(p * 0.1, abs=0.006)
    assert not any("c" in d for d in draws)  # never seen in the pool: never added


def test_pool_nearest_breaks_ties_at_random() -> None:
    pool = Pool(("x", "y", "z"), ("X", "Y", "Z"), (frozenset("a"), frozenset("b"), frozenset("cd")))
    assert pool.prevalence == {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3, "d": 1 / 3}
    assert pool.nearest(frozenset("cd"), np.random.default_rng(0)) == 2  # exact
    picks = {pool.nearest(frozenset("ab"), np.random.default_rng(s)) for s in range(20)}
    assert picks == {0, 1}  # Jaccard 1/2 each, {c, d} scores 0


def _bench_dir(data_dir: Path) -> Path:
    root = data_dir.parent / "bench"
    root.mkdir()
    with (root / "refs.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "report"])
        w.writerows((i, f) for i, (_, _, f) in zip(IDS, STUDIES))
    return root


def test_bench_runs_the_baselines(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CXREVAL_DATA_DIR", raising=False)
    root = _bench_dir(data_dir)
    raw = {
        "name": "tiny",
        "data_dir": "../data",
        "bootstrap": {"resamples": 20},
        "engine": {"name": "rules", "workers": 1},
        "metrics": ["spec-errors", "bleu2"],
        "datasets": [{"name": "d", "references": {"path": "refs.csv", "text_col": "report"}}],
        "systems": [
            {"name": "oracle", "baseline": "retrieval-oracle", "seed": 0},
            {"name": "noisy", "baseline": "retrieval-oracle", "noise": 0.3, "seed": 0},
            {"name": "random", "baseline": "random-train", "seed": 0},
            {"name": "normal", "baseline": "normal-template"},
        ],
    }
    cfg = resolve_paths(BenchConfig.model_validate(raw), root)
    result, stats = run_benchmark(cfg, root / "out")
    assert stats.pairs == 4 * len(IDS)
    assert set(result.baselines) == {"oracle", "noisy", "random", "normal"}
    oracle_tp = {e.entity for e in result.entities if e.system == "oracle" and e.tp > 0}
    assert {"cardiomegaly", "pleural_effusion", "pneumothorax"} <= oracle_tp
    assert not [e for e in result.entities if e.system == "normal" and e.tp > 0]
    notes = [n for n in result.notes if n.startswith("oracle on d:")]
    assert len(notes) == 1 and "metric:baseline:retrieval-oracle" in notes[0] and "noise:0|" in notes[0]
    assert any(n.startswith("noisy on d:") and "noise:0.3|" in n for n in result.notes)
    # the same candidates load_candidates gives (the path evaluate-equivalence tests take)
    want = baseline_reports("retrieval-oracle", IDS, data_dir, seed=0).texts
    assert load_candidates(cfg.systems[0], IDS, [], "d", data_dir=cfg.data_dir) == want
    # normal / abnormal strata exist for every system
    for stratum in ("normal", "abnormal"):
        board = result.leaderboard("d", stratum)
        assert {r.system for r in board.rows} == {"oracle", "noisy", "random", "normal"}
        assert all(r.error_free is not None for r in board.rows)


def test_a_rerun_takes_each_baseline_from_the_bench_cache(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The choice is stored under the hash of its inputs (never the report text) and read back
    the same; another seed or changed data files are another key."""
    import sqlite3

    from cxreval.bench.cache import BenchCache
    from cxreval.bench.config import SystemConfig
    from cxreval.bench.runner import load_iu_baseline
    from cxreval.datasets.baselines import RetrievalData, baseline_key

    monkeypatch.delenv("CXREVAL_DATA_DIR", raising=False)
    data = RetrievalData.load(data_dir)
    oracle = SystemConfig(name="oracle", baseline="retrieval-oracle", seed=0)
    with BenchCache(data_dir.parent / "cache.sqlite") as cache:
        first = load_iu_baseline(oracle, IDS, "findings", data_dir, data=data, cache=cache)
        assert cache.count("baselines") == 1
        again = load_iu_baseline(oracle, IDS, "findings", data_dir, data=RetrievalData.load(data_dir), cache=cache)
        assert again == first and again.texts == baseline_reports("retrieval-oracle", IDS, data_dir, seed=0).texts
    stored = sqlite3.connect(data_dir.parent / "cache.sqlite").execute("SELECT choice FROM baselines").fetchone()[0]
    assert "Cardiomegaly" not in stored and json.loads(stored)["source_uids"] == first.source_uids
    key = baseline_key("retrieval-oracle", IDS, seed=0, noise=0.0, section="findings", data=data)
    assert key != baseline_key("retrieval-oracle", IDS, seed=1, noise=0.0, section="findings", data=data)
    with (data_dir / "iu-xray" / "indiana_reports.csv").open("a", newline="") as fh:
        csv.writer(fh).writerow(["999", "normal", "Lungs are clear.", ""])
    assert key != baseline_key("retrieval-oracle", IDS, seed=0, noise=0.0, section="findings", data=RetrievalData.load(data_dir))


def test_config_checks(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CXREVAL_DATA_DIR", raising=False)
    root = _bench_dir(data_dir)
    base = "name: x\ndatasets: [{name: d, references: {path: refs.csv, text_col: report}}]\nsystems:\n"
    bad = {
        "noise on random": "  - {name: r, baseline: random-train, noise: 0.1}\n",
        "seed on a file": "  - {name: f, path: refs.csv, seed: 1}\n",
        "noise above 1": "  - {name: o, baseline: retrieval-oracle, noise: 1.5}\n",
    }
    for why, system in bad.items():
        (root / "bad.yaml").write_text(base + system)
        with pytest.raises(InputError):
            load_config(root / "bad.yaml")
        assert why
    (root / "nodata.yaml").write_text(base + "  - {name: o, baseline: retrieval-oracle}\n")
    cfg = load_config(root / "nodata.yaml")
    with pytest.raises(InputError, match="data_dir"):
        run_benchmark(cfg, root / "out2")


@pytest.mark.skipif(shared_data_dir() is None, reason="shared data not present")
def test_real_rexrank_ids_never_retrieve_themselves() -> None:
    data = shared_data_dir()
    assert data is not None
    ids = list(json.loads((data / "rexrank-iu" / "ReXRank_IUXray_test.json").read_text()))
    out = baseline_reports("retrieval-oracle", ids, data, seed=0)
    assert out.exact + out.nearest + out.uncoded == len(ids) == 590
    assert not {iu_uid(i) for i in ids} & set(out.source_uids)
    assert out.exact > out.nearest > 0  # most studies have an exact finding set in the pool
    again = baseline_reports("retrieval-oracle", ids, data, seed=0)
    assert again.source_uids == out.source_uids

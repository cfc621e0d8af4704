"""Throughput and peak memory of the rule engine vs a CheXbert-shaped labeler, on IU X-ray.

Both run over the findings + impression of the 3,851 IU X-ray reports, each in its own child
process (so peak memory is that engine's alone), started from this script:
- cxreval's rule engine, one process, one thread, caches starting empty (a fresh `RuleExtractor()`, as a
  user gets it: each distinct sentence and section is read once), all 3,851 reports;
- a CheXbert-shaped baseline (when torch and transformers are installed): a BERT-base encoder
  (12 layers, hidden 768) with 14 classification heads (13 x 4 classes + 1 x 2, as CheXbert),
  randomly initialised (its speed does not depend on its weights), batch 16, inputs truncated at
  512 tokens, on the CPU with torch's default threads. Its WordPiece tokenizer is trained here
  on the same reports (no download). It runs on the first `--baseline-reports` reports (default
  320 = 20 batches) and its rate is reported per report.

Run: python benchmarks/iu_throughput.py      (baseline needs: pip install torch==2.13.0 transformers)
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import queue
import resource
import time

from _data import iu_reports, iu_text


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_rules(texts: list[str], out: mp.Queue) -> None:
    from cxreval.extract.rules import RuleExtractor

    extractor = RuleExtractor()
    base = _peak_mib()
    t0 = time.perf_counter()
    n = sum(len(extractor.extract(t).mentions) for t in texts)
    elapsed = time.perf_counter() - t0
    out.put(
        {
            "reports": len(texts),
            "seconds": elapsed,
            "peak_mib": _peak_mib(),
            "start_mib": base,
            "mentions": n,
            "engine": extractor.signature,
        }
    )


def run_chexbert_shaped(texts: list[str], corpus: list[str], out: mp.Queue) -> None:
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(corpus, vocab_size=30522, show_progress=False)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=wp._tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    config = BertConfig()  # BERT-base: 12 layers, 768 hidden, 12 heads, vocab 30522
    encoder = BertModel(config).eval()
    heads = torch.nn.ModuleList([torch.nn.Linear(768, 4) for _ in range(13)] + [torch.nn.Linear(768, 2)]).eval()
    base = _peak_mib()
    t0 = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(texts), 16):
            batch = tok(texts[i : i + 16], padding=True, truncation=True, max_length=512, return_tensors="pt")
            cls = encoder(**batch).last_hidden_state[:, 0]
            _ = [h(cls).argmax(-1) for h in heads]
    elapsed = time.perf_counter() - t0
    out.put(
        {
            "reports": len(texts),
            "seconds": elapsed,
            "peak_mib": _peak_mib(),
            "start_mib": base,
            "threads": torch.get_num_threads(),
        }
    )


def _child(target, *args) -> dict:
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    p = ctx.Process(target=target, args=(*args, q))
    p.start()
    while True:
        try:
            result = q.get(timeout=5)
            break
        except queue.Empty:
            if not p.is_alive():
                raise RuntimeError(f"{target.__name__} exited with code {p.exitcode} and no result") from None
    p.join()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--baseline-reports", type=int, default=320)
    args = ap.parse_args()
    texts = [iu_text(r) for r in iu_reports()]
    texts = [t for t in texts if t]
    rules = _child(run_rules, texts)
    rate = rules["reports"] / rules["seconds"]
    print(f"data: IU X-ray, all {len(texts)} reports with text (findings + impression)")
    print(
        f"rule engine ({rules['engine']}): {rules['reports']} reports in {rules['seconds']:.2f} s = "
        f"{rate:,.0f} reports/s, one process, one thread; peak RSS {rules['peak_mib']:.0f} MiB "
        f"(target >= 2,000 reports/s)"
    )
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("baseline skipped: install torch==2.13.0 and transformers to run the CheXbert-shaped baseline")
        return
    subset = texts[: args.baseline_reports]
    bert = _child(run_chexbert_shaped, subset, texts)
    bert_rate = bert["reports"] / bert["seconds"]
    print(
        f"CheXbert-shaped baseline (BERT-base + 14 heads, random weights, batch 16, max 512 tokens, "
        f"{bert['threads']} torch threads): {bert['reports']} reports in {bert['seconds']:.2f} s = "
        f"{bert_rate:,.1f} reports/s; peak RSS {bert['peak_mib']:.0f} MiB"
    )
    print(
        f"ratio: rule engine is {rate / bert_rate:,.0f}x the baseline's reports/s (target >= 50x); "
        f"peak memory {rules['peak_mib'] / bert['peak_mib']:.2f}x the baseline's"
    )


if __name__ == "__main__":
    main()

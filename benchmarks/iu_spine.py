"""Rule-engine throughput and ontology coverage of IU X-ray MeSH codes.

Prints (1) reports per second for the rule engine over all IU X-ray reports (findings +
impression), single process, after a warm-up; (2) the share of MeSH-coded findings (every
non-normal code, counted by occurrence; `normal` and `No Indexing` excluded) that map to an
ontology entity, with the most frequent unmapped codes.

Run: python benchmarks/iu_spine.py
Data: ../shared/data/iu-xray/indiana_reports.csv (all 3,851 reports; no split needed: nothing is tuned here).
"""

from __future__ import annotations

import time
from collections import Counter

from _data import iu_reports, iu_text

from cxreval.extract.rules import RuleExtractor
from cxreval.ontology import load_ontology
from cxreval.ontology.mesh import MeshMapper


def main() -> None:
    rows = iu_reports()
    texts = [iu_text(r) for r in rows]
    onto = load_ontology()
    extractor = RuleExtractor(onto)
    for t in texts[:50]:
        extractor.extract(t)  # warm-up
    t0 = time.perf_counter()
    n_mentions = 0
    for t in texts:
        n_mentions += len(extractor.extract(t).mentions)
    elapsed = time.perf_counter() - t0
    print(
        f"rule engine: {len(texts)} IU X-ray reports in {elapsed:.2f} s = {len(texts) / elapsed:,.0f} reports/s "
        f"(one process; {n_mentions} mentions; engine {extractor.signature}; ontology {onto.signature})"
    )

    mapper = MeshMapper(onto)
    mapped = 0
    total = 0
    unmapped: Counter[str] = Counter()
    for r in rows:
        matches, missing = mapper.map_field(r["MeSH"])
        mapped += len(matches)
        total += len(matches) + len(missing)
        unmapped.update(m.raw for m in missing)
    share = mapped / total if total else float("nan")
    print(f"MeSH coverage: {mapped}/{total} non-normal code occurrences map to an entity = {share:.2%} (target >= 97%)")
    if unmapped:
        print("most frequent unmapped codes:", ", ".join(f"{c} ({n})" for c, n in unmapped.most_common(10)))


if __name__ == "__main__":
    main()

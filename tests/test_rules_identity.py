"""Speed-ups of the rule engine never change what it reads (issue 14, item 3).

Each fast path is compared with the plain path on every IU X-ray report and every ReXrank IU text
(read at run time from the shared data; skipped without it): the extractions must be identical,
mention by mention, field by field.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from cxreval.extract.rules import RuleExtractor
from cxreval.ontology import load_ontology
from tests.conftest import shared_data_dir


def _texts() -> list[str]:
    import csv

    root = shared_data_dir()
    if root is None:
        pytest.skip("shared data not present")
    texts: list[str] = []
    with (root / "iu-xray" / "indiana_reports.csv").open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            texts.append(f"Findings: {row['findings']}\nImpression: {row['impression']}")
    for path in sorted((root / "rexrank-iu").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        studies = data.values() if isinstance(data, dict) else data
        for study in studies:
            if isinstance(study, dict):
                texts.extend(str(v) for k, v in study.items() if isinstance(v, str) and k.startswith(("section_", "model_")))
    return list(dict.fromkeys(texts))


def _dump(extractor: RuleExtractor, text: str) -> list[dict]:
    return [m.model_dump() for m in extractor.extract(text).mentions]


def test_normal_statement_precheck_changes_nothing() -> None:
    onto = load_ontology()
    fast = RuleExtractor(onto)
    assert all(rule.requires for rule in fast.rules.normal_statements)  # every packaged rule has its pre-check
    plain_rules = dataclasses.replace(
        fast.rules, normal_statements=[dataclasses.replace(r, requires=()) for r in fast.rules.normal_statements]
    )
    plain = RuleExtractor(onto, plain_rules)
    texts = _texts()
    assert len(texts) > 3000
    differ = [t[:80] for t in texts if _dump(fast, t) != _dump(plain, t)]
    assert not differ, f"{len(differ)} reports read differently, e.g. {differ[:3]}"


def test_sentence_cache_changes_nothing() -> None:
    onto = load_ontology()
    cached = RuleExtractor(onto)
    plain = RuleExtractor(onto, cached.rules, cache_mib=0)
    texts = _texts()
    differ = [t[:80] for t in texts if _dump(cached, t) != _dump(plain, t)]
    assert not differ, f"{len(differ)} reports read differently, e.g. {differ[:3]}"
    # a second pass reads every sentence from the cache, with the same result
    again = [t[:80] for t in texts[:500] if _dump(cached, t) != _dump(plain, t)]
    assert not again
    small = RuleExtractor(onto, cached.rules, cache_mib=0.02)  # eviction keeps results right
    assert all(_dump(small, t) == _dump(plain, t) for t in texts[:300])
    assert 0 < small._sentences.nbytes <= small._sentences.budget and len(small._sentences) < 300


def test_report_cache_changes_nothing() -> None:
    onto = load_ontology()
    plain = RuleExtractor(onto, cache_mib=0)
    cached = RuleExtractor(onto, plain.rules, cache_mib=1.6)  # evicts: 300 texts through 400 KB of reports
    texts = _texts()[:300]
    first = [cached.extract(t) for t in texts]
    assert cached.extract(texts[-1]) is first[-1]  # a repeat is the cached extraction itself
    assert cached.extract(texts[0]) is not first[0]  # evicted long ago: read again
    kept = len(cached._reports)
    assert 10 < kept < 300 and cached._reports.nbytes <= cached._reports.budget
    assert all(_dump(cached, t) == _dump(plain, t) for t in texts)  # first reads, then repeats
    assert all(_dump(cached, t) == _dump(plain, t) for t in texts[-kept:])
    assert not RuleExtractor(onto, plain.rules, cache_mib=0)._reports.budget  # caches off: all off
    assert not RuleExtractor(onto, plain.rules, report_cache=False)._reports.budget


def test_fast_paths_of_text_match_the_plain_ones() -> None:
    """Section titles and tokens found by the fast paths of ``cxreval.extract.text`` are those of
    the plain regular expressions, on random text built from titles, separators and odd letters."""
    import random

    from cxreval.extract.text import _TITLE_RE, _TOKEN_RE, Token, _titles, scan_tokens, sentence_spans, token_columns

    rng = random.Random(14)
    parts = [
        "findings",
        "finding",
        "impression",
        "clinical history",
        "history",
        "reason for exam",
        "reason for examination",
        "exam",
        "ination",
        ":",
        " :",
        " ",
        "\n",
        "\t",
        ".",
        ";",
        ",",
        "x",
        "1.5",
        "!",
        "?",
        "FINDINGS",
        "ı",
        "-",
        "no acute disease",
        "lungs are clear",
        "2",
        "1.2.3",
        "..",
        "'s",
        "٣",
    ]
    odd = {"FINDINGS", "ı", "٣"}  # upper case and non-ASCII: the plain paths (a third of the texts)
    for i in range(4000):
        pick = parts if i % 3 == 0 else [p for p in parts if p not in odd]
        text = "".join(rng.choice(pick) for _ in range(rng.randint(0, 12)))
        assert list(_titles(text)) == [(m.start(), m.end(), m.group(1)) for m in _TITLE_RE.finditer(text)]
        for lo in (0, min(3, len(text))):
            plain = [
                Token("." if m.group() in "!?" else m.group(), m.start(), m.end())
                for m in _TOKEN_RE.finditer(text, lo, len(text))
            ]
            assert scan_tokens(text, lo) == plain
            assert all(type(t) is Token for t in scan_tokens(text, lo))
            assert token_columns(text, lo) == ([t.text for t in plain], [t.start for t in plain], [t.end for t in plain])
            # sentences: the tokens up to each "." token, as RuleExtractor._read_sentences reads them
            sentences, a = [], 0
            for b, tok in enumerate(plain):
                if tok.text == "." or b == len(plain) - 1:
                    sentences.append(plain[a : b + 1])
                    a = b + 1
            spans = sentence_spans(text, lo)
            assert spans == [(s[0].start, s[-1].end) for s in sentences]
            assert [scan_tokens(text, x, y) for x, y in spans] == sentences


def test_mentions_sharing_a_field_set_stay_apart() -> None:
    """Copied mentions share their ``model_fields_set`` (memory): changing a copy never reaches another."""
    extractor = RuleExtractor(load_ontology())
    text = "Findings: No acute cardiopulmonary abnormality. No pneumothorax."
    extractor.extract(text)
    again = extractor.extract("Impression: " + text)  # from the sentence and section caches
    a, b = [m for m in again.mentions if m.implied][:2]  # one statement: copies of one mention
    assert a.model_fields_set is b.model_fields_set
    before = set(b.model_fields_set)
    changed = a.model_copy(update={"severity": "mild"})
    assert "severity" in changed.model_fields_set and b.model_fields_set == before
    with pytest.raises(ValueError):
        a.severity = "mild"  # frozen: the set is never touched in place
    assert b.model_fields_set == before


def test_copied_mentions_are_what_validation_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mentions the engine copies from a validated one (moved from a cache, stamped from a kind's
    template, or naming another entity of a normal statement) are what validating each one makes:
    the same values, in the same order, and the same fields set."""
    from cxreval.extract.rules import engine

    onto = load_ontology()
    extractor = RuleExtractor(onto)
    texts = _texts()
    copied = [extractor.extract(t) for t in texts[:1500] + texts[:200]]  # repeats: the report cache
    monkeypatch.setattr(engine, "_TEMPLATES", 0)  # no templates: every mention validated
    plain = RuleExtractor(onto, extractor.rules, cache_mib=0)
    for text, got in zip(texts[:1500] + texts[:200], copied):
        want = plain.extract(text)
        assert len(got.mentions) == len(want.mentions)
        for m, v in zip(got.mentions, want.mentions):
            assert list(m.__dict__.items()) == list(v.__dict__.items())
            assert m.model_fields_set == v.model_fields_set
        assert not plain._templates


def test_extraction_built_directly_is_what_model_construct_makes() -> None:
    from cxreval.extract.models import Extraction
    from cxreval.extract.rules.engine import _extraction

    mentions = RuleExtractor(load_ontology()).extract("Findings: No pneumothorax.").mentions
    want = Extraction.model_construct(engine="rules@x", mentions=mentions, text="Findings: No pneumothorax.")
    got = _extraction("rules@x", mentions, "Findings: No pneumothorax.")
    assert list(got.__dict__.items()) == list(want.__dict__.items())
    assert got.model_fields_set == want.model_fields_set and got == want
    assert (got.__pydantic_extra__, got.__pydantic_private__) == (want.__pydantic_extra__, want.__pydantic_private__)


def test_fast_judgement_paths_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entity states copied from a validated one per kind, judgement rows built directly and the
    mentioned entities sorted into ontology order are what the plain paths give."""
    import random

    from cxreval.extract import models
    from cxreval.extract.models import EntityState
    from cxreval.judge.compare import _in_ontology_order, compare_states
    from cxreval.judge.models import EntityJudgement

    onto = load_ontology()
    extractor = RuleExtractor(onto)
    rng = random.Random(7)
    ids = onto.entity_ids
    for _ in range(200):
        pick = set(rng.sample(ids, rng.randint(0, 20))) | {"not_an_entity"}
        assert _in_ontology_order(pick, onto) == [e for e in onto.entities if e.id in pick]
    texts = _texts()[:400]
    for ref, cand in zip(texts, reversed(texts)):
        ref_states, cand_states = extractor.extract(ref).states(), extractor.extract(cand).states()
        for state in [*ref_states.values(), *cand_states.values()]:
            fresh = EntityState(**{name: getattr(state, name) for name in state.model_fields_set})
            assert list(state.__dict__.items()) == list(fresh.__dict__.items())
            assert state.model_fields_set == fresh.model_fields_set
        for row in compare_states("p", ref_states, cand_states, onto):
            plain = EntityJudgement.model_construct(**row.__dict__)
            assert list(row.__dict__.items()) == list(plain.__dict__.items())
            assert row.model_fields_set == plain.model_fields_set
            assert (row.__pydantic_extra__, row.__pydantic_private__) == (plain.__pydantic_extra__, plain.__pydantic_private__)
    copied = [extractor.extract(t).states() for t in texts]
    monkeypatch.setattr(models, "_STATE_TEMPLATES", {})
    monkeypatch.setattr(models, "_STATE_KINDS", 0)  # every state validated
    monkeypatch.setattr(models, "_STATUSES", frozenset())  # and aggregated by the general rule
    for text, got in zip(texts, copied):
        want = extractor.extract(text).states()
        assert [(e, list(s.__dict__.items()), s.model_fields_set) for e, s in got.items()] == [
            (e, list(s.__dict__.items()), s.model_fields_set) for e, s in want.items()
        ]
    assert not models._STATE_TEMPLATES


def test_skipping_steps_a_sentence_gives_no_cue_for_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A status step is not run in a sentence lacking every cue category it needs
    (``StatusRules.steps_for``); running every step on every mention reads the same, rule ids too."""
    from cxreval.extract.rules.interpreter import StatusRules

    onto = load_ontology()
    texts = _texts()
    fast = RuleExtractor(onto, cache_mib=0)
    want = [[(m.model_dump(), m.rule_ids) for m in fast.extract(t).mentions] for t in texts]
    monkeypatch.setattr(StatusRules, "steps_for", lambda self, categories: tuple(step for step, _ in self.steps))
    every = RuleExtractor(onto, cache_mib=0)
    for text, expected in zip(texts, want):
        assert [(m.model_dump(), m.rule_ids) for m in every.extract(text).mentions] == expected, text

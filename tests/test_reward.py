"""cxreval.reward: the RL reward (issue 14, item 5)."""

from __future__ import annotations

import pickle

import pytest

import cxreval
from cxreval.caches import MIB, STATE_BYTES, text_weight
from cxreval.io import ReportPair
from cxreval.reward import ClinicalReward, completion_text, compute_score

REF = "Small left pleural effusion. Right pneumothorax. Heart size is normal."
CANDS = [
    REF,  # identical
    "Small left pleural effusion. No pneumothorax.",  # misses the (critical) pneumothorax
    "Large left pleural effusion. Right pneumothorax.",  # severity not aligned
    "",  # empty
    "@@@ ### 12345",  # garbage
]


def _evaluate_errors(ref: str, cands: list[str]) -> list[int]:
    pairs = [ReportPair(pair_id=str(i), reference=ref, candidate=c) for i, c in enumerate(cands)]
    res = cxreval.evaluate(pairs)
    return [int(res.errors.loc[str(i), "errors"]) for i in range(len(cands))]


def test_neg_errors_equals_minus_the_evaluate_error_count() -> None:
    r = ClinicalReward("neg-errors")
    want = [-e for e in _evaluate_errors(REF, CANDS)]
    assert r.score([REF] * len(CANDS), CANDS) == want
    assert want[0] == 0 and want[1] < 0 and want[2] == -1 and want[3] == want[4] < 0


def test_entity_f1_and_critical_weighting() -> None:
    f1 = ClinicalReward("entity-f1").score([REF] * 3, CANDS[:3])
    assert f1 == [1.0, pytest.approx(2 / 3), 1.0]  # 1 TP, 1 FN -> 2/3; severity is not presence
    assert ClinicalReward("entity-f1").score_one("No acute disease.", "Normal chest.") == 1.0  # both normal
    crit = ClinicalReward("critical-weighted", critical_weight=3)
    plain = ClinicalReward("neg-errors")
    # pneumothorax is critical in the ontology: its miss counts 3 times
    assert crit.score_one(REF, CANDS[1]) == plain.score_one(REF, CANDS[1]) - 2
    assert "critical_weight:3" in str(crit.signature) and "metric:reward-critical-weighted" in str(crit.signature)


def test_any_completion_gets_a_defined_reward() -> None:
    r = ClinicalReward()
    for bad in (None, "", "   ", 42, ["not", "a", "chat"], {"content": None}, "\x00\ufffd" * 50, "a" * 100_000):
        assert isinstance(r.score_one(REF, bad), float)
    assert completion_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": "No effusion."}]) == "No effusion."


def test_trl_call_reads_the_reference_column_and_names_a_missing_one() -> None:
    r = ClinicalReward("neg-errors", reference_key="report")
    chats = [[{"role": "assistant", "content": c}] for c in CANDS[:2]]
    assert r(prompts=["p", "p"], completions=chats, report=[REF, REF]) == r.score([REF, REF], CANDS[:2])
    with pytest.raises(KeyError, match="no column 'report'"):
        r(prompts=["p"], completions=["x"], reference=[REF])
    assert r.__name__ == "cxreval_neg_errors"


def _two_entries(text: str) -> float:
    """A cache budget (MiB) that holds two, not three, reports like ``text`` (one entity state each)."""
    return 2.5 * text_weight(text, 1, STATE_BYTES) / MIB


def test_verl_compute_score_and_reference_cache() -> None:
    assert compute_score("iu", CANDS[1], REF) == ClinicalReward().score_one(REF, CANDS[1])
    r = ClinicalReward(reference_cache_mib=_two_entries("Large effusion."))
    for ref in ("No effusion.", "Small effusion.", "Large effusion.", "No effusion."):
        r.score_one(ref, "No effusion.")
    assert r.cached_references == ["Large effusion.", "No effusion."]  # least recently used dropped


def test_completions_are_cached_apart_from_references() -> None:
    r = ClinicalReward(
        reference_cache_mib=_two_entries("Small left effusion."),
        completion_cache_mib=_two_entries("Small left effusion. Case 0."),
    )
    plain = ClinicalReward(completion_cache_mib=0)  # reads every completion
    refs = ["Small left effusion.", "No pneumothorax."]
    cands = [f"Small left effusion. Case {i}." for i in range(5)] + ["Small left effusion. Case 0."]
    got = [r.score_one(refs[i % 2], c) for i, c in enumerate(cands)]
    assert got == [plain.score_one(refs[i % 2], c) for i, c in enumerate(cands)]
    assert r.cached_references == ["Small left effusion.", "No pneumothorax."]  # new completions evict none
    assert len(r._completions) == 2 and not plain._completions


def test_bad_settings_are_refused_and_reward_pickles() -> None:
    with pytest.raises(ValueError, match="unknown reward shape"):
        ClinicalReward("bleu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="critical_weight"):
        ClinicalReward("critical-weighted", critical_weight=0.5)
    r = pickle.loads(pickle.dumps(ClinicalReward("entity-f1")))
    assert r.score_one(REF, REF) == 1.0


@pytest.mark.parametrize("shape", ["neg-errors", "entity-f1", "critical-weighted"])
def test_a_completion_with_lookalike_letters_earns_no_more_than_the_floor(shape: str) -> None:
    """Issue 27, item 7: "pneumоthorax" with a Cyrillic "о" is read as a pneumothorax, so hiding a
    finding gains nothing; and writing look-alikes at all is worth no more than the floor."""
    r = ClinicalReward(shape)
    plain = "Small left pleural effusion. Right pneumothorax."
    disguised = "Small left pleural effusion. Right pneum\u043ethorax."
    hiding = "Small left pleural effusion. No pneum\u043ethorax."  # denies it, in disguise
    floor = r.lookalike_floor(REF)
    assert floor == (0.0 if shape == "entity-f1" else r.score_one(REF, ""))
    assert r.score_one(REF, disguised) == min(r.score_one(REF, plain), floor) < r.score_one(REF, plain)
    assert r.score_one(REF, hiding) <= min(r.score_one(REF, "Small left pleural effusion. No pneumothorax."), floor)
    # the same completion without the look-alike letter is scored as before
    assert r.score_one(REF, plain) == ClinicalReward(shape).score_one(REF, plain)


def test_workers_give_the_rewards_of_one_process() -> None:
    """``num_workers``: spawned processes score a large batch in chunks, with the same rewards
    (look-alike floors included), and a pickled reward carries no pool."""
    refs = [REF] * 6 + ["No acute cardiopulmonary process."] * 6
    cands = [*CANDS, "Small left pleural effusion. Right pneum\u043ethorax.", None] * 2
    cands = cands[:12]
    one = ClinicalReward("graded")
    with ClinicalReward("graded", num_workers=2, parallel_min=4) as many:
        assert many.score(refs, cands) == one.score(refs, cands)
        assert many._pool is not None  # the batch went to the workers
        copy = pickle.loads(pickle.dumps(many))
        assert copy._pool is None and copy.score(refs[:2], cands[:2]) == one.score(refs[:2], cands[:2])
    assert many._pool is None
    with pytest.raises(ValueError, match="num_workers"):
        ClinicalReward(num_workers=0)

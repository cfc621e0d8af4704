"""The reward inside a real TRL ``GRPOTrainer`` step (issue 14): a tiny randomly initialised policy
generates completions, TRL calls ``ClinicalReward`` with them and the dataset's reference column,
and the step trains on the rewards.

Needs the optional packages torch (install ``torch==2.13.0`` first: the CPU build) and trl; the
test is skipped without them. Nothing is downloaded: the policy is a 2-layer GPT-2 built from a
config, its tokenizer is a word-level vocabulary built here from the prompts and reports.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")
transformers = pytest.importorskip("transformers")

from cxreval.reward import ClinicalReward  # noqa: E402

REFERENCES = [
    "Small left pleural effusion. No pneumothorax.",
    "Mild cardiomegaly. The lungs are clear.",
    "Right lower lobe consolidation concerning for pneumonia.",
    "No acute cardiopulmonary abnormality.",
]
PROMPT = "Findings:"


def _tokenizer() -> transformers.PreTrainedTokenizerFast:
    """A word-level tokenizer over the reports' words (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = sorted({w for t in [*REFERENCES, PROMPT] for w in t.replace(".", " .").replace(":", " :").split()})
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[EOS]", *words])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]")
    tok.padding_side = "left"
    return tok


def test_a_grpo_step_trains_on_the_clinical_reward(tmp_path: Path) -> None:
    torch.manual_seed(0)
    tok = _tokenizer()
    config = transformers.GPT2Config(
        vocab_size=len(tok),
        n_positions=64,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=tok.eos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    policy = transformers.GPT2LMHeadModel(config)
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    data = datasets.Dataset.from_dict({"prompt": [PROMPT] * len(REFERENCES), "reference": REFERENCES})

    calls: list[tuple[list[str], list[str], list[float]]] = []
    reward = ClinicalReward("neg-errors", reference_key="reference")

    def clinical(prompts, completions, **columns):  # noqa: ANN001, ANN003, ANN202 - TRL's documented signature
        rewards = reward(prompts=prompts, completions=completions, **columns)
        calls.append((list(completions), list(columns["reference"]), list(rewards)))
        return rewards

    clinical.__name__ = reward.__name__
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=12,
        max_steps=1,
        learning_rate=1e-2,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        seed=0,
    )
    trainer = trl.GRPOTrainer(model=policy, reward_funcs=[clinical], args=args, train_dataset=data, processing_class=tok)
    trainer.train()

    assert calls, "TRL never called the reward"
    completions, references, rewards = calls[0]
    assert len(completions) == len(references) == len(rewards) >= 4
    assert set(references) <= set(REFERENCES)
    # TRL passed the dataset's reference of each completion; the reward is the one cxreval computes
    assert rewards == [reward.score_one(r, c) for r, c in zip(references, completions)]
    assert all(isinstance(r, float) and math.isfinite(r) and r <= 0 for r in rewards)
    logged = [h for h in trainer.state.log_history if any(k.startswith("rewards/") for k in h)]
    assert logged, trainer.state.log_history
    changed = any(not torch.equal(before[n], p.detach()) for n, p in trainer.model.named_parameters())
    assert changed or all(r == rewards[0] for r in rewards), "a step with unequal rewards must move the policy"

"""Shared fixtures: a tiny hand-written ontology for arithmetic tests, and the shared data dir."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cxreval.ontology import Ontology, parse_ontology

TINY = {
    "id": "tiny",
    "version": "0.1",
    "categories": [{"id": "lung", "name": "Lung"}, {"id": "pleura", "name": "Pleura"}],
    "groups": [
        {"id": "parenchyma", "name": "Parenchyma", "category": "lung"},
        {"id": "pleural", "name": "Pleural", "category": "pleura"},
    ],
    "labelsets": {"chexpert14": {"name": "CheXpert", "labels": ["Pleural Effusion", "Pneumothorax", "Consolidation"]}},
    "entities": [
        {
            "id": "effusion",
            "name": "Pleural effusion",
            "kind": "finding",
            "category": "pleura",
            "group": "pleural",
            "synonyms": ["effusion"],
            "attributes": ["location", "severity", "comparison"],
            "mappings": {"chexpert14": ["Pleural Effusion"]},
        },
        {
            "id": "pneumothorax",
            "name": "Pneumothorax",
            "kind": "finding",
            "category": "pleura",
            "group": "pleural",
            "attributes": ["location", "severity", "comparison"],
            "critical": True,
            "mappings": {"chexpert14": ["Pneumothorax"]},
        },
        {
            "id": "consolidation",
            "name": "Consolidation",
            "kind": "finding",
            "category": "lung",
            "group": "parenchyma",
            "attributes": ["location", "comparison"],
            "mappings": {"chexpert14": ["Consolidation"]},
        },
        {
            "id": "pneumonia",
            "name": "Pneumonia",
            "kind": "differential",
            "category": "lung",
            "group": "parenchyma",
            "attributes": [],
        },
    ],
}


@pytest.fixture
def tiny() -> Ontology:
    return parse_ontology(TINY, "tiny")


def shared_data_path() -> Path:
    """Where the shared data is looked for: $CXREVAL_DATA_DIR, else ``../shared/data`` beside the
    repository (present or not)."""
    env = os.environ.get("CXREVAL_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def shared_data_dir() -> Path | None:
    """:func:`shared_data_path` when it is a folder; None when absent."""
    path = shared_data_path()
    return path if path.is_dir() else None


# --- tiny checkpoints of the weight-based metrics (tests/tiny_checkpoints.py), once per session ----
# torch and transformers come with the [test] extra (through [rl]): without them these fail, not skip.


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """One torch thread while a tiny model runs: xdist runs several workers on few cores, and
    torch's threads per worker then wait on each other (a pass over the tester's pairs went from
    0.6 s to 12 s on 2 busy cores)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def chexbert_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny CheXbert in its two layouts: ``original`` (chexbert.pth) and ``hf`` (+ heads.safetensors)."""
    from tests.tiny_checkpoints import write_chexbert

    return write_chexbert(tmp_path_factory.mktemp("chexbert"))


@pytest.fixture(scope="session")
def roberta_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny 6-layer RoBERTa named ``distilroberta-base`` (bertscore-distilroberta's shape)."""
    from tests.tiny_checkpoints import write_roberta

    return write_roberta(tmp_path_factory.mktemp("roberta") / "distilroberta-base")


@pytest.fixture(scope="session")
def radgraph_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny RadGraph archive (config.json, weights.th, vocabulary/, encoder/)."""
    from tests.tiny_checkpoints import write_tiny_radgraph

    folder = tmp_path_factory.mktemp("rg") / "radgraph"
    write_tiny_radgraph(folder)
    return folder


@pytest.fixture(scope="session")
def rate_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny RaTEScore: ``ner`` (token classifier over RaTE's labels) and ``emb`` (entity encoder)."""
    from tests.tiny_checkpoints import write_rate

    return write_rate(tmp_path_factory.mktemp("rate"))

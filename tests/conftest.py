"""Shared fixtures: a tiny hand-written ontology for arithmetic tests, and the shared data dir."""

from __future__ import annotations

import os
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
        {"id": "effusion", "name": "Pleural effusion", "kind": "finding", "category": "pleura",
         "group": "pleural", "synonyms": ["effusion"], "attributes": ["location", "severity", "comparison"],
         "mappings": {"chexpert14": ["Pleural Effusion"]}},
        {"id": "pneumothorax", "name": "Pneumothorax", "kind": "finding", "category": "pleura",
         "group": "pleural", "attributes": ["location", "severity", "comparison"], "critical": True,
         "mappings": {"chexpert14": ["Pneumothorax"]}},
        {"id": "consolidation", "name": "Consolidation", "kind": "finding", "category": "lung",
         "group": "parenchyma", "attributes": ["location", "comparison"],
         "mappings": {"chexpert14": ["Consolidation"]}},
        {"id": "pneumonia", "name": "Pneumonia", "kind": "differential", "category": "lung",
         "group": "parenchyma", "attributes": []},
    ],
}


@pytest.fixture
def tiny() -> Ontology:
    return parse_ontology(TINY, "tiny")


def shared_data_dir() -> Path | None:
    """``../shared/data`` beside the repository, or $CXREVAL_DATA_DIR; None when absent."""
    env = os.environ.get("CXREVAL_DATA_DIR")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"
    return path if path.is_dir() else None

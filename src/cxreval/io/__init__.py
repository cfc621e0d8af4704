"""Read reference and candidate reports from user files into validated :class:`ReportPair` objects.

Everything downstream (extraction, scoring, judging) assumes clean input: one non-empty text per
side, unique ids. This module is the single place where user files are checked, so that a bad
file fails early with *every* problem listed (file, position, field, what is wrong) instead of
failing half-way through a scoring run or, worse, silently scoring fewer reports than were given.
No row is repaired, and none is skipped unless the caller asks and is told the count
(``on_missing="skip"``, a dataset's studies outside the pool: :mod:`~cxreval.io.datasets`); any
problem raises :class:`InputError`.

Formats (chosen from the suffix unless ``format=`` / ``--format`` is given; ``-`` reads standard
input and needs the format named):

``csv`` / ``tsv``
    Header row required. Parsed with the standard :mod:`csv` module, so every value stays a
    ``str`` and nothing ("NA", "null", "") turns into NaN; the same parser yields the line on
    which each record starts, so positions always match the parsed records (quoted fields may
    span several lines). Positions are **line N**: the 1-based line where the record starts
    (the header is line 1). Header names are stripped of surrounding whitespace.
``jsonl`` (``.jsonl``, ``.ndjson``)
    One JSON object per line; blank lines are ignored. Positions are **line N** (1-based).
``parquet``
    Read with pyarrow. Positions are **row N**: the 1-based data row index.
``json``
    Either a list of objects (read like JSONL; positions are **item N**, the 1-based list
    index) or the ReXrank layout: an object keyed by study id whose values hold ``report``,
    ``section_findings``, ``section_impression``, ... (problems name the study **id**). The field
    read is the one the caller names (``text_col``); with none named, references read the field
    of ``section`` and candidates read ``model_prediction``, the field ReXrank's prediction
    files use. A named field is never replaced by another one.

Public datasets in their own layouts (MIMIC-CXR's report tree and sectioned CSV, CheXpert Plus,
ReXGradient, ReXrank's JSON of any dataset) are read by :mod:`~cxreval.io.datasets` into the
ReXrank layout's fields (``layout=`` of :func:`read_reports`, ``reference_layout=`` of
:func:`read_pair_files`).

JSON values keep their types (the :mod:`json` module is used rather than pandas, which would
coerce numbers and dates), so a number, null or list where a report is expected is reported.
Text files must be UTF-8; a UTF-8 byte order mark is accepted. Ids are compared as strings,
stripped of surrounding whitespace (integer ids in JSON/Parquet become their decimal string),
except leading whitespace before ``=``, ``+``, ``-`` or ``@``, which is kept: stripping it would
turn text into a spreadsheet formula.
Report text is kept as is except that surrounding whitespace is stripped.

The package follows the data: :mod:`~cxreval.io.records` reads any table into records and checks
single values, :mod:`~cxreval.io.pairs` turns records into pairs, :mod:`~cxreval.io.streams`
reads a pairs file in bounded memory and in chunks, :mod:`~cxreval.io.errors` says what is wrong,
and :mod:`~cxreval.io.writers` writes every output file atomically.
"""

from __future__ import annotations

import warnings
from typing import Any

from cxreval.io.datasets import StudiesWithoutText, load_layout, read_study_ids
from cxreval.io.errors import MAX_LISTED_PROBLEMS, InputError, InputProblem, Unit
from cxreval.io.pairs import (
    COPIED_WARN_SHARE,
    PREDICTION_FIELD,
    SECTIONS,
    CopiedCandidatesWarning,
    MissingIdsSkipped,
    ReportPair,
    read_pair_files,
    read_pairs,
    read_reports,
    warn_copied_counts,
    warn_if_copied,
)
from cxreval.io.records import (
    FALSE_WORDS,
    FORMATS,
    PARQUET_EXTRA,
    STDIN,
    TRUE_WORDS,
    PathLike,
    Record,
    RecordTable,
    Uniqueness,
    bool_value,
    check_columns,
    load_table,
    load_whole_table,
    number_value,
    raise_problems,
    read_json_value,
    record_id,
    require_records,
    table_format,
    text_value,
)
from cxreval.io.streams import CHUNK_BYTES, MAX_KEPT_PROBLEMS, STREAM_FORMATS, ChunkCensus, PairChunk, PairStream

__all__ = [
    "CHUNK_BYTES",
    "COPIED_WARN_SHARE",
    "FALSE_WORDS",
    "FORMATS",
    "MAX_KEPT_PROBLEMS",
    "MAX_LISTED_PROBLEMS",
    "PARQUET_EXTRA",
    "PREDICTION_FIELD",
    "SECTIONS",
    "STDIN",
    "STREAM_FORMATS",
    "TRUE_WORDS",
    "ChunkCensus",
    "StudiesWithoutText",
    "load_layout",
    "read_study_ids",
    "CopiedCandidatesWarning",
    "MissingIdsSkipped",
    "InputError",
    "InputProblem",
    "PairChunk",
    "PairStream",
    "PathLike",
    "Record",
    "RecordTable",
    "ReportPair",
    "Uniqueness",
    "Unit",
    "bool_value",
    "check_columns",
    "load_table",
    "load_whole_table",
    "number_value",
    "raise_problems",
    "read_json_value",
    "read_pair_files",
    "read_pairs",
    "read_reports",
    "record_id",
    "require_records",
    "table_format",
    "text_value",
    "warn_copied_counts",
    "warn_if_copied",
]

#: Names that moved to :mod:`cxreval.scores.fingerprint` in 0.8.1; read here with a
#: DeprecationWarning until 0.9.
_MOVED = frozenset(
    {
        "references_fingerprint",
        "candidates_fingerprint",
        "reference_digest",
        "fingerprint_hex",
        "fingerprints_comparable",
        "FINGERPRINT_PREFIX",
    }
)


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import importlib

        warnings.warn(
            f"cxreval.io.{name} moved to cxreval.scores.fingerprint.{name} (0.8.1); the old path goes in 0.9",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("cxreval.scores.fingerprint"), name)
    raise AttributeError(f"module 'cxreval.io' has no attribute {name!r}")

"""The fixed names shared across layers, declared once: engines, uncertainty policies, report
sections, input formats, presence values and the like.

Each is a ``Literal`` type (for pydantic models and type checkers) and, where code needs the
values at run time, a tuple taken from it with :func:`typing.get_args`, in the same order. The
pydantic models, the checks and the command line's choices are all built from these, so a value
added here reaches every one of them. A nested ``Literal`` names a subset the code needs on its
own (``Literal[A, "x"]`` is ``A``'s values then ``"x"``).

Standard library only, and importing nothing of cxreval: every layer may import it, and the
command line reads its choices here at start-up without loading the engines.
"""

from __future__ import annotations

from typing import Literal, get_args

# -- engines -------------------------------------------------------------------------------------
#: The engines a bench config takes (``engine.name``): every engine but ``llm-pairwise-2pass``.
BenchEngineName = Literal["rules", "llm-extract", "llm-pairwise"]
#: The judgement engines, in registry order (:func:`cxreval.engines.engine_names`, which builds
#: them; a test keeps the two equal).
EngineName = Literal[BenchEngineName, "llm-pairwise-2pass"]
ENGINES: tuple[EngineName, ...] = get_args(EngineName)
#: The engines that judge pairs with SPEC-CXR's prompt (also the LLM judges of ``cxreval meta``).
LLM_PAIRWISE_ENGINES: tuple[EngineName, ...] = ("llm-pairwise", "llm-pairwise-2pass")

#: Where the rule engine judges: local processes or Ray actors (``--executor``, ``engine.executor``).
Executor = Literal["local", "ray"]
EXECUTORS: tuple[Executor, ...] = get_args(Executor)

#: How ``evaluate`` writes its judgement rows (:mod:`cxreval.judge.files`): ``compact`` rows that are
#: not implied, evidence as offsets into the input; ``full`` every row, evidence as text.
RowStyle = Literal["compact", "full"]
ROW_STYLES: tuple[RowStyle, ...] = get_args(RowStyle)

#: What a join of two files does with an id in one file only (``--on-missing``): stop with every
#: such id listed (the default), or leave them out, counted (:func:`cxreval.io.read_pair_files`).
OnMissing = Literal["error", "skip"]
ON_MISSING: tuple[OnMissing, ...] = get_args(OnMissing)

# -- certainty -----------------------------------------------------------------------------------
#: The hedged certainty grades, strongest first (``extract/rules/cues.yaml`` grades each hedge).
HedgeGrade = Literal["probable", "possible", "alternative"]
HEDGE_GRADES: tuple[HedgeGrade, ...] = get_args(HedgeGrade)
#: Every certainty grade of a mention: ``definite``, the hedged grades, ``negated``.
Certainty = Literal["definite", HedgeGrade, "negated"]

#: The uncertainty policies that need no hedge grade: every hedge counts, or none does. The only
#: ones llm-extract takes (its answers grade no hedge; the pairwise judges are told the grades).
UngradedPolicy = Literal["positive", "negative"]
UNGRADED_POLICIES: tuple[UngradedPolicy, ...] = get_args(UngradedPolicy)
#: How hedged findings count: the ``uncertain:`` option of every judge signature (``--uncertain``)
#: and the ``certainty:`` option of every label signature. ``positive`` all, ``negative`` none,
#: ``probable`` only the ``probable`` grade, ``probable-alternative`` probable and alternative
#: (the grade sets: :data:`cxreval.extract.models.CERTAINTY_POLICIES`).
UncertainPolicy = Literal[UngradedPolicy, "probable", "probable-alternative"]
UNCERTAIN_POLICIES: tuple[UncertainPolicy, ...] = get_args(UncertainPolicy)

#: How ``-1`` (uncertain) labels of a label table count (``cxreval agree --uncertain``).
UncertainLabel = Literal["negative", "positive", "exclude"]
UNCERTAIN_LABELS: tuple[UncertainLabel, ...] = get_args(UncertainLabel)
#: How an annotators' tie counts in a majority vote (``cxreval agree --tie``).
Tie = Literal["exclude", "positive", "negative"]
TIES: tuple[Tie, ...] = get_args(Tie)

# -- judgements ----------------------------------------------------------------------------------
#: The presence values counted per entity (TN follows from the number of pairs).
CountedPresence = Literal["TP", "FP", "FN"]
COUNTED_PRESENCE: tuple[CountedPresence, ...] = get_args(CountedPresence)
#: The presence value of a judgement row.
Presence = Literal[CountedPresence, "TN"]
PRESENCE_VALUES: tuple[Presence, ...] = get_args(Presence)

# -- input ---------------------------------------------------------------------------------------
#: Table formats cxreval reads (``format=``, ``--format``; their suffixes: :data:`cxreval.io.FORMATS`).
InputFormat = Literal["csv", "tsv", "jsonl", "parquet", "json"]
INPUT_FORMATS: tuple[InputFormat, ...] = get_args(InputFormat)
#: Which text of a ReXrank JSON study is the report (``section=``, ``--section``; the fields:
#: :data:`cxreval.io.SECTIONS`).
Section = Literal["report", "findings", "impression"]
REPORT_SECTIONS: tuple[Section, ...] = get_args(Section)
#: The public datasets whose own layout a references file may be in (``--refs-layout``,
#: ``references.layout``; :mod:`cxreval.io.datasets`).
DatasetLayout = Literal["mimic-cxr", "mimic-cxr-sectioned", "chexpert-plus", "rexgradient", "rexrank"]
DATASET_LAYOUTS: tuple[DatasetLayout, ...] = get_args(DatasetLayout)

# -- bench ---------------------------------------------------------------------------------------
#: The baselines drawn from the IU X-ray train split (:func:`cxreval.datasets.baselines.baseline_reports`).
RetrievalBaseline = Literal["random-train", "retrieval-oracle"]
RETRIEVAL_BASELINES: tuple[RetrievalBaseline, ...] = get_args(RetrievalBaseline)
#: A bench system's ``baseline:``.
Baseline = Literal["normal-template", "copy-reference", RetrievalBaseline]

# -- LLM settings --------------------------------------------------------------------------------
#: The LLM backends (:class:`cxreval.llm.config.LLMConfig` ``provider``, ``--provider``).
Provider = Literal["openai", "anthropic"]
PROVIDERS: tuple[Provider, ...] = get_args(Provider)
#: Structured-output variants (``response_format``, ``--response-format``).
ResponseFormat = Literal["auto", "json_schema", "json_object", "none"]
RESPONSE_FORMATS: tuple[ResponseFormat, ...] = get_args(ResponseFormat)
#: Answer layouts: one field per entity (``dense``, SPEC-CXR's) or a list of the mentioned ones.
SchemaStyle = Literal["dense", "sparse"]
SCHEMA_STYLES: tuple[SchemaStyle, ...] = get_args(SchemaStyle)

"""What an extractor returns: the entity mentions found in one report.

Both engines (rules, LLM) produce these models, so the judgement step never needs to know which
engine ran.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from cxreval.literals import HEDGE_GRADES, Certainty, UncertainPolicy

Status = Literal["present", "absent", "uncertain"]
ComparisonChange = Literal["new", "increased", "decreased", "unchanged", "resolved"]
Side = Literal["left", "right", "bilateral"]
Severity = Literal["mild", "moderate", "severe"]
# Certainty (cxreval.literals): how sure a mention is, finer than its ``status``: ``definite``
# (present), ``probable`` ("likely atelectasis", "most suggestive of"), ``possible`` ("may
# represent atelectasis", "cannot exclude", "differential includes"), ``alternative``
# ("atelectasis or scarring", "X versus Y") and ``negated`` (absent).
# The three hedged grades (HEDGE_GRADES) are all ``status="uncertain"``, strongest first: an entity
# hedged twice takes the stronger one. The seed is pyConText's DEFINITE / PROBABLE / AMBIVALENT
# existence categories (see docs/engine.md).
#: The grade a status implies when an engine gives none (the LLM engines give only a status).
DEFAULT_CERTAINTY: dict[str, Certainty] = {"present": "definite", "uncertain": "possible", "absent": "negated"}
#: Named certainty policies: which hedged grades count as positive (``definite`` always does,
#: ``negated`` never). ``positive`` and ``negative`` are the two ``uncertain`` policies cxreval
#: has always had; ``probable`` counts a hedge only when the report leans towards the finding;
#: ``probable-alternative`` also counts two findings offered as alternatives ("atelectasis or
#: scarring"): the grade set that matches the IU X-ray MeSH coders best on train
#: (``benchmarks/iu_certainty.py``). The policy is the ``uncertain:`` option of every judge
#: signature and the ``certainty:`` option of every label signature (``scores/labels.py``).
#: The keys are :data:`cxreval.literals.UNCERTAIN_POLICIES`, in order (a test keeps them so).
CERTAINTY_POLICIES: dict[UncertainPolicy, frozenset[str]] = {
    "positive": frozenset(HEDGE_GRADES),
    "negative": frozenset(),
    "probable": frozenset({"probable"}),
    "probable-alternative": frozenset({"probable", "alternative"}),
}

_HEDGE_RANK: dict[str, int] = {g: i for i, g in enumerate(HEDGE_GRADES)}
_STATUSES = frozenset({"present", "uncertain", "absent"})

ModelT = TypeVar("ModelT", bound=BaseModel)


def _slot_setter(name: str) -> Callable[[object, object], None]:
    """The setter of one of pydantic's ``BaseModel`` slots: ``object.__setattr__(obj, name, v)``
    without looking the name up each time (the engine makes every mention this way)."""
    descriptor = BaseModel.__dict__.get(name)
    setter = getattr(descriptor, "__set__", None)
    if setter is None:  # another pydantic layout: the plain way
        return lambda obj, value: object.__setattr__(obj, name, value)
    return setter


_new_object = object.__new__
_set_dict = _slot_setter("__dict__")
_set_fields_set = _slot_setter("__pydantic_fields_set__")
_set_extra = _slot_setter("__pydantic_extra__")
_set_private = _slot_setter("__pydantic_private__")


def constructed(cls: type[ModelT], fields: dict[str, Any], fields_set: set[str]) -> ModelT:
    """``cls.model_construct(**fields)`` for a model whose ``fields`` are all given, in field
    order (``fields_set`` names them), with no private attributes, extras or ``model_post_init``:
    its values unvalidated (the caller made them right), without pydantic's generic loop."""
    new = _new_object(cls)
    _set_dict(new, fields)
    _set_fields_set(new, fields_set)
    _set_extra(new, None)
    _set_private(new, None)
    return new


def _default_certainty(data: dict[str, Any]) -> Certainty:
    return DEFAULT_CERTAINTY.get(data.get("status", ""), "possible")


def _check_certainty(status: str, certainty: str) -> None:
    """A grade must agree with its status: definite <=> present, negated <=> absent, a hedge
    grade <=> uncertain (else a policy would count a hedge as definite, or the reverse)."""
    ok = certainty in HEDGE_GRADES if status == "uncertain" else certainty == DEFAULT_CERTAINTY.get(status)
    if not ok:
        raise ValueError(f"certainty {certainty!r} does not fit status {status!r}")


class Attributes(BaseModel):
    """Where, how severe, and how changed from a prior: shared by mentions and entity states.

    ``tip``: for a device, the landmark its tip is reported at (``attributes.yaml`` landmarks), and
    ``tip_mm`` the distance of the tip above it ("5 cm above the carina", negative below).
    ``size_mm``: a finding's stated size, its largest dimension in millimetres ("6 mm nodule").
    """

    model_config = ConfigDict(frozen=True)

    side: Side | None = None
    zones: tuple[str, ...] = ()
    severity: Severity | None = None
    comparison: ComparisonChange | None = None
    tip: str | None = None
    tip_mm: float | None = None
    size_mm: float | None = None


class ReadingRules(BaseModel):
    """The ids of the rules that made a reading (``docs/engine.md``, "Rule kinds"): the rule that
    named the entity, the one that set the status and its grade, and those that set the side,
    zones, severity and change (None: not set). The rule engine fills it; LLM mentions have none."""

    model_config = ConfigDict(frozen=True)

    entity: str | None = None
    status: str | None = None
    side: str | None = None
    zones: str | None = None
    severity: str | None = None
    change: str | None = None
    tip: str | None = None
    size: str | None = None

    def items(self) -> list[tuple[str, str]]:
        """(reading, rule id) for each reading a rule set, in field order."""
        return [(k, v) for k, v in self.__dict__.items() if v is not None]

    def ids(self) -> str:
        """The ids as :attr:`Mention.rule_ids` stores them: joined by "|" in field order, "" for none."""
        return "|".join(v or "" for v in self.__dict__.values())


#: The readings a rule id is kept for, in the order of :attr:`Mention.rule_ids`.
RULE_READINGS: tuple[str, ...] = tuple(ReadingRules.model_fields)


def named_rules(rule_ids: str | None) -> ReadingRules | None:
    """Rule ids as the engine stores them (:meth:`ReadingRules.ids`), by name."""
    if rule_ids is None:
        return None
    return ReadingRules(**{r: v or None for r, v in zip(RULE_READINGS, rule_ids.split("|"))})


class Mention(Attributes):
    """One mention of an ontology entity in a report, with its certainty and attributes.

    ``certainty`` grades the status (see :data:`Certainty`); when an engine gives none it follows
    from the status (present -> definite, uncertain -> possible, absent -> negated).
    ``implied`` marks readings that no word naming the entity makes: absences that come from a
    global normal statement ("no acute cardiopulmonary process"), and a malposition derived from a
    device's tip (rule ``device.malposition``). ``historical`` marks
    mentions of past findings ("history of pneumonia"): they never make an entity present.

    ``start`` / ``end`` locate the mention and ``sentence_start`` / ``sentence_end`` its evidence
    in the original report text ``source``, a reference to the one string the
    :class:`Extraction` holds (a copy of the sentence per mention made a long report cost
    gigabytes); :attr:`sentence` slices it. An engine that gives only a quote (the LLM) passes
    ``sentence="..."`` instead.
    """

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True)

    entity: str
    status: Status
    certainty: Certainty = Field(default_factory=_default_certainty)
    historical: bool = False
    implied: bool = False
    section: str = "body"
    quote: str = Field("", alias="sentence")
    start: int = -1
    end: int = -1
    sentence_start: int = -1
    sentence_end: int = -1
    cue: str | None = None
    #: The ids of the rules behind this reading (the rule engine's; None from an LLM), joined by "|"
    #: in :data:`RULE_READINGS` order, "" where no rule set a reading (:meth:`ReadingRules.ids`);
    #: :attr:`rules` is the named view. One string, not a tuple or a model: a mention whose fields
    #: are all strings, numbers and None is one the garbage collector never tracks, and the engine
    #: makes and caches tens of thousands (a tuple here made a cold pass 3 % slower).
    rule_ids: str | None = Field(None, exclude=True, repr=False)
    source: str = Field("", exclude=True, repr=False)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rules(self) -> ReadingRules | None:
        """The rules behind this reading, by name (serialised as ``rules``)."""
        return named_rules(self.rule_ids)

    @model_validator(mode="before")
    @classmethod
    def _rules_by_name(cls, data: Any) -> Any:
        """Read a dumped mention's ``rules`` mapping back into :attr:`rule_ids`."""
        if isinstance(data, dict) and "rules" in data:
            named = data["rules"]
            data = {k: v for k, v in data.items() if k != "rules"}
            if isinstance(named, dict) and "rule_ids" not in data:
                data["rule_ids"] = "|".join(named.get(r) or "" for r in RULE_READINGS)
        return data

    @model_validator(mode="after")
    def _grade_fits_status(self) -> Mention:
        _check_certainty(self.status, self.certainty)
        return self

    @property
    def sentence(self) -> str:
        """The evidence: the engine's quote, else the sentence's slice of the report text."""
        if self.quote or self.sentence_end < 0:
            return self.quote
        return self.source[self.sentence_start : self.sentence_end]


class EntityState(Attributes):
    """A report's overall statement about one entity, aggregated over its mentions."""

    entity: str
    status: Status
    certainty: Certainty = Field(default_factory=_default_certainty)
    #: (side, severity) for each of left and right where the mentions size them ("small right and
    #: large left effusions"; a bilateral size sizes both), in the order given; ``()`` for a state
    #: of one mention (its ``side`` and ``severity`` say it).
    side_severity: tuple[tuple[Literal["left", "right"], Severity], ...] = ()
    evidence: str = ""
    cue: str | None = None
    #: The ids of the rules behind the reading the evidence and cue come from, as
    #: :attr:`Mention.rule_ids` holds them (the rule engine's; None from an LLM).
    rule_ids: str | None = Field(None, exclude=True, repr=False)

    @property
    def rules(self) -> ReadingRules | None:
        """The rules behind this state's reading, by name."""
        return named_rules(self.rule_ids)

    @model_validator(mode="after")
    def _grade_fits_status(self) -> EntityState:
        _check_certainty(self.status, self.certainty)
        return self


class Extraction(BaseModel):
    """All mentions found in one report by one extractor.

    ``text`` is the report the mention offsets point into (empty when an engine gives none);
    each mention reads its evidence from it, so the text is held once however many mentions.
    """

    model_config = ConfigDict(frozen=True)

    engine: str
    mentions: tuple[Mention, ...]
    text: str = ""

    @model_validator(mode="before")
    @classmethod
    def _bind_mentions(cls, data: Any) -> Any:
        """Point mentions that carry offsets but no text (e.g. read back from JSON) at ``text``."""
        if not isinstance(data, dict) or not data.get("text"):
            return data
        text = data["text"]
        mentions = []
        for m in data.get("mentions", ()):
            if isinstance(m, Mention):
                if not m.source and m.sentence_end >= 0:
                    m = m.model_copy(update={"source": text})
            elif isinstance(m, dict) and not m.get("source"):
                m = {**m, "source": text}
            mentions.append(m)
        return {**data, "mentions": mentions}

    def states(self) -> dict[str, EntityState]:
        """Aggregate mentions per entity.

        A report that both affirms and denies an entity affirms it (a positive statement is the
        more specific one); present beats uncertain beats absent. Attributes come from the
        mentions that carry the winning status; the first one given wins, except that two
        different sides make the entity bilateral. Among hedged mentions the strongest grade wins
        (probable > possible > alternative), and the evidence and cue are the first mention's with
        that grade.
        """
        by_entity: dict[str, list[Mention]] = {}
        for m in self.mentions:
            if m.historical and m.status != "absent":
                continue
            by_entity.setdefault(m.entity, []).append(m)
        out: dict[str, EntityState] = {}
        for entity, mentions in by_entity.items():
            if len(mentions) == 1 and mentions[0].status in _STATUSES:
                # One mention (most entities of a report): the general rule below, worked out.
                m = mentions[0]
                zones_one = m.zones
                out[entity] = _state(
                    entity,
                    m.status,
                    m.certainty,
                    m.side or None,
                    tuple(dict.fromkeys(zones_one)) if len(zones_one) > 1 else tuple(zones_one),
                    m.severity or None,
                    m.comparison or None,
                    m.sentence,
                    m.cue,
                    m.rule_ids,
                    (m.tip, m.tip_mm, m.size_mm),
                )
                continue
            status: Status = "absent"
            for candidate in ("present", "uncertain"):
                if any(m.status == candidate for m in mentions):
                    status = candidate
                    break
            chosen = [m for m in mentions if m.status == status]
            explicit = [m for m in chosen if not m.implied] or chosen
            sides = {m.side for m in explicit if m.side}
            side: Side | None
            if len(sides) > 1:
                side = "bilateral"
            else:
                side = next(iter(sides), None)
            zones: dict[str, None] = {}
            for m in explicit:
                for z in m.zones:
                    zones.setdefault(z, None)
            lead = explicit[0]
            if status == "uncertain" and len(explicit) > 1:
                lead = min(explicit, key=lambda m: _HEDGE_RANK.get(m.certainty, len(_HEDGE_RANK)))
            out[entity] = _state(
                entity,
                status,
                lead.certainty,
                side,
                tuple(zones),
                next((m.severity for m in explicit if m.severity), None),
                next((m.comparison for m in explicit if m.comparison), None),
                lead.sentence,
                lead.cue,
                lead.rule_ids,
                _measures(explicit),
                _side_severity(explicit),
            )
        return out


#: One validated EntityState per kind (status, grade, attributes): the states of that kind copy it.
_STATE_TEMPLATES: dict[tuple[Any, ...], EntityState] = {}
#: At most this many kinds kept (a bound never reached in practice; 0: validate every state).
_STATE_KINDS = 4096


#: A state's tip, tip distance and size (see :class:`Attributes`).
Measures = tuple[str | None, float | None, float | None]
_NO_MEASURES: Measures = (None, None, None)


def _measures(mentions: list[Mention]) -> Measures:
    """The tip of the last mention that names one, with its distance (a line's course is told to
    its end: "PICC through the brachiocephalic vein, tip in the SVC"), and the largest size given
    (two lesions of one kind are one state: the larger stands for them, whichever is named first)."""
    tip = next((m for m in reversed(mentions) if m.tip is not None), None)
    size = max((m.size_mm for m in mentions if m.size_mm is not None), default=None)
    return (tip.tip, tip.tip_mm, size) if tip is not None else (None, None, size)


def _side_severity(mentions: list[Mention]) -> tuple[tuple[str, str], ...]:
    """Each of left and right with the first size a mention gives it (a bilateral one both); ``()``
    for one mention, whose side and severity say it."""
    if len(mentions) < 2:
        return ()
    found: dict[str, str] = {}
    for m in mentions:
        if m.severity and m.side:
            for side in ("left", "right") if m.side == "bilateral" else (m.side,):
                found.setdefault(side, m.severity)
    return tuple(found.items())


def _state(
    entity: str,
    status: str,
    certainty: str,
    side: str | None,
    zones: tuple[str, ...],
    severity: str | None,
    comparison: str | None,
    evidence: str,
    cue: str | None,
    rule_ids: str | None = None,
    measures: Measures = _NO_MEASURES,
    side_severity: tuple[tuple[str, str], ...] = (),
) -> EntityState:
    """``EntityState(entity=..., status=..., ...)`` with every field given: validated once per
    kind, then copied with the entity, evidence, cue and rule ids of each state (strings: nothing
    else to check). Scoring aggregates every report's mentions, so this
    runs once per entity per report."""
    key = (status, certainty, side, zones, severity, comparison, measures, side_severity)
    like = _STATE_TEMPLATES.get(key)
    if (
        like is None
        or type(entity) is not str
        or type(evidence) is not str
        or not (cue is None or type(cue) is str)
        or not (rule_ids is None or type(rule_ids) is str)
    ):
        tip, tip_mm, size_mm = measures
        made = EntityState(
            entity=entity,
            status=status,
            certainty=certainty,
            side=side,
            zones=zones,
            severity=severity,
            comparison=comparison,
            tip=tip,
            tip_mm=tip_mm,
            size_mm=size_mm,
            side_severity=side_severity,
            evidence=evidence,
            cue=cue,
            rule_ids=rule_ids,
        )
        if like is None and len(_STATE_TEMPLATES) < _STATE_KINDS:
            _STATE_TEMPLATES[key] = made
        return made
    fields = like.__dict__.copy()
    fields["entity"] = entity
    fields["evidence"] = evidence
    fields["cue"] = cue
    fields["rule_ids"] = rule_ids
    return constructed(EntityState, fields, like.__pydantic_fields_set__)  # shared: a frozen model never changes it

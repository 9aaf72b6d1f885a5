"""The scheduling policy: crane-scheduler's ``DynamicSchedulerPolicy`` file, accepted as-is,
plus loadsched's own optional fields beside crane's.

A crane file loads unchanged (including the ``maxLimitPecent`` spelling). Unknown fields and
invalid values are rejected at load time with a :class:`~shared.errors.ConfigError` that names
the file and the field, e.g. ``policy.yaml: spec.syncPolicy[1].period: must be > 0``.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue

from shared.annotation_keys import HOT_VALUE_KEY as HOT_VALUE_KEY
from shared.annotation_keys import NODE_LIMITS_KEY as NODE_LIMITS_KEY
from shared.durations import format_duration
from shared.errors import ConfigError, LoadschedError
from shared.placement_policy import EstimationPolicy, ScoringPolicy
from shared.policy_fields import GoDuration, Resource, Strict
from shared.rebalance_policy import RebalancePolicy, RebalanceThreshold

EXTRA_ACTIVE_PERIOD = timedelta(minutes=5)
"""A metric value stays fresh for its sync period plus this (crane's ExtraActivePeriod)."""
HOT_VALUE_ACTIVE_PERIOD = timedelta(minutes=5)
"""The hot value annotation stays fresh this long (crane's DefautlHotVauleActivePeriod)."""


_CRANE_MAXIMA = re.compile(r"(?:cpu|mem)_usage_max_avg_1[hd]")
"""crane's maxima over 1h and 1d of the 5-minute average: a pod that ran 5 minutes is in them."""
_AVERAGE = re.compile(r"_avg_(\d{1,6})([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


AVERAGE_DELAY = timedelta(seconds=43)
"""How long before its timestamp a metric's window ends, unless ``syncPolicy[].delay`` says:
the median on the chart's recording rules (instantaneous usage every 30 s, 5-minute averages
every minute) behind a 15 s scrape, as ``bench/sample_delay.py --rules chart`` measures it:
the middle of three runs' medians (40.7, 43.1 and 59.0 s; p90 64.7, 68.2 and 83.1 s), which
move with the phase of the rules against the annotator's queries."""
MAXIMUM_DELAY = timedelta(seconds=205)
"""The same for crane's hourly and daily maxima (over the 5-minute averages, evaluated every
5 minutes by the chart's rules), by the same bench: the middle of three runs' medians (179.0,
205.5 and 207.7 s; p90 298.8, 324.6 and 327.4 s)."""


def default_delay(name: str) -> timedelta:
    """:data:`MAXIMUM_DELAY` for crane's ``*_usage_max_avg_1h``/``_1d``, else
    :data:`AVERAGE_DELAY`."""
    return MAXIMUM_DELAY if _CRANE_MAXIMA.fullmatch(name) else AVERAGE_DELAY


def default_window(name: str) -> timedelta | None:
    """How long after a pod starts ``name``'s value fully shows it, from the name alone: 5m for
    crane's ``*_usage_max_avg_1h``/``_1d``; ``<n><unit>`` for a name ending ``_avg_<n><unit>``
    (``cpu_usage_avg_5m``: 5m); else unknown (``None``: the metric is not estimated)."""
    if _CRANE_MAXIMA.fullmatch(name):
        return timedelta(minutes=5)
    match = _AVERAGE.search(name)
    if match is None or "max_avg" in name or int(match.group(1)) == 0:
        return None
    return timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[match.group(2)])


class SyncPolicy(Strict):
    """How often one metric is synced from Prometheus onto node annotations."""

    name: str = Field(min_length=1)
    """The metric: a recording rule's name, and the Node annotation key its value is written to."""
    period: GoDuration
    """How often the metric is synced; a value stays fresh for this plus 5m."""
    promql: str | None = None
    """loadsched: a PromQL expression used instead of the recording rule named ``name``."""
    scale: float | None = None
    """loadsched: divide query results by this (default 100: recording rules give percent)."""
    resource: Resource | None = None
    """loadsched: the resource the metric measures, for estimation and scoring strategies;
    default from the name's prefix (``cpu_`` or ``mem_``), else none."""
    window: GoDuration | None = None
    """loadsched: how long after a pod starts the metric's value fully shows it (an average's
    window); default from the name (:func:`default_window`), else the value is not estimated."""
    delay: GoDuration | None = None
    """loadsched: how long before its annotation's timestamp the metric's window ends: the
    scrape interval, the recording rules' evaluation intervals and the annotator's query all
    come between what a node used and the value written. Estimation takes the sample as taken
    this long before its timestamp, so a pod is held until the window has really covered it.
    Default from the name (:func:`default_delay`)."""

    @field_validator("window")
    @classmethod
    def _positive_window(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError("must be > 0")
        return value

    @field_validator("delay")
    @classmethod
    def _delay_range(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and not timedelta(0) <= value <= timedelta(hours=1):
            raise ValueError("must be between 0s and 1h")
        return value

    @property
    def measures(self) -> Resource | None:
        """:attr:`resource`, or the one the name's prefix says."""
        if self.resource is not None:
            return self.resource
        if self.name.startswith("cpu_"):
            return "cpu"
        if self.name.startswith("mem_"):
            return "memory"
        return None

    @property
    def lag(self) -> timedelta:
        """:attr:`delay`, or the one the name says."""
        return self.delay if self.delay is not None else default_delay(self.name)

    @property
    def coverage(self) -> timedelta | None:
        """:attr:`window`, or the one the name says."""
        return self.window if self.window is not None else default_window(self.name)

    @property
    def releases(self) -> bool:
        """Whether the value lets go of a pod a window after it left: not for a maximum
        (crane's ``*_usage_max_avg_1h``/``_1d``, or any name with ``max``), which holds a
        pod's peak for longer than the window it takes to show it."""
        return "max" not in self.name

    @field_validator("period")
    @classmethod
    def _positive_period(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be > 0")
        return value

    @field_validator("scale")
    @classmethod
    def _positive_scale(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError("must be a positive number")
        return value


def _either_spelling(schema: dict[str, Any]) -> None:
    """The JSON Schema of a predicate accepts crane's ``maxLimitPecent`` or loadsched's
    ``maxLimitPercent``, one of the two."""
    properties = schema["properties"]
    crane = properties["maxLimitPecent"]
    properties["maxLimitPercent"] = {
        **crane,
        "description": "loadsched: the same limit, spelled correctly (crane refuses it).",
    }
    schema["required"] = [name for name in schema["required"] if name != "maxLimitPecent"]
    schema["oneOf"] = [{"required": ["maxLimitPecent"]}, {"required": ["maxLimitPercent"]}]


class PredicatePolicy(Strict):
    """Filter: a node whose usage of ``name`` is above ``max_limit_percent`` is overloaded."""

    model_config = ConfigDict(json_schema_extra=_either_spelling)

    name: str = Field(min_length=1)
    """The metric compared with the limit (it needs a syncPolicy entry)."""
    max_limit_percent: float = Field(
        validation_alias=AliasChoices("maxLimitPecent", "maxLimitPercent"),
        serialization_alias="maxLimitPecent",
        json_schema_extra={"minimum": 0, "maximum": 1},
    )
    """A fraction (0.65 = 65 %); 0 turns the predicate off. crane spells it ``maxLimitPecent``."""

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        if isinstance(data, dict) and "maxLimitPecent" in data and "maxLimitPercent" in data:
            raise ValueError("give maxLimitPecent or maxLimitPercent, not both")
        return data

    @field_validator("max_limit_percent")
    @classmethod
    def _fraction(cls, value: float) -> float:
        if not math.isfinite(value) or value < 0:
            raise ValueError("must be a fraction between 0 and 1 (0 turns the predicate off)")
        if value > 1:
            raise ValueError(f"must be a fraction between 0 and 1, got {value} (0.65 means 65 %)")
        return value


class PriorityPolicy(Strict):
    """Score: this metric's weight in the node score."""

    name: str = Field(min_length=1)
    """The metric scored (it needs a syncPolicy entry)."""
    weight: float = Field(json_schema_extra={"minimum": 0})
    """Its weight; every weight counts in the total, also while the metric's value is unknown."""

    @field_validator("weight")
    @classmethod
    def _non_negative(cls, value: float) -> float:
        if not math.isfinite(value) or value < 0:
            raise ValueError("must be a non-negative number")
        return value


class HotValuePolicy(Strict):
    """Every ``count`` pods bound to a node within ``time_range`` add 1 to its hot value."""

    time_range: GoDuration = Field(alias="timeRange")
    """The window of bindings counted."""
    count: int = Field(json_schema_extra={"minimum": 1})
    """Bindings in the window per point of hot value."""

    @field_validator("time_range")
    @classmethod
    def _positive_range(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be > 0")
        return value

    @field_validator("count")
    @classmethod
    def _positive_count(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("must be > 0")
        return value


StaleData = Literal["failOpen", "failClosed"]


class PolicySpec(Strict):
    """What the annotator syncs and how the extender filters and scores."""

    sync_policy: tuple[SyncPolicy, ...] = Field(default=(), alias="syncPolicy")
    """The metrics synced onto Node annotations, each with its period."""
    predicate: tuple[PredicatePolicy, ...] = ()
    """Filter: the limits a node's usage must stay under, checked in order."""
    priority: tuple[PriorityPolicy, ...] = ()
    """Score: the metrics weighed into a node's score."""
    hot_value: tuple[HotValuePolicy, ...] = Field(default=(), alias="hotValue")
    """The hot value: pods bound to a node lately, subtracted from its score."""
    stale_data: StaleData = Field(default="failOpen", alias="staleData")
    """loadsched: what filter does with a missing or stale value; crane's behaviour is failOpen."""
    timestamp_zone: str = Field(default="UTC", alias="timestampZone")
    """loadsched: the zone annotation timestamps are written in. crane writes local wall
    time with a literal ``Z`` (``Asia/Shanghai`` by default); set that zone to share a
    cluster with crane."""
    estimation: EstimationPolicy = EstimationPolicy()
    """loadsched: count the pods a metric's sample does not show yet."""
    scoring: ScoringPolicy = ScoringPolicy()
    """loadsched: a scoring strategy, and how scores become 0..10."""
    hot_value_limit: int = Field(default=0, alias="hotValueLimit", ge=0)
    """loadsched: filter refuses a node whose fresh hot value is above this (pods were just
    bound there and its metrics do not show them yet); 0 is off, crane's behaviour."""
    rebalance: RebalancePolicy = RebalancePolicy()
    """loadsched: move pods off nodes that stay overloaded."""

    @field_validator("timestamp_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as e:
            raise ValueError(f"unknown time zone {value!r}") from e
        return value

    @model_validator(mode="after")
    def _names_resolve(self) -> PolicySpec:
        seen: set[str] = set()
        for i, sync in enumerate(self.sync_policy):
            if sync.name in seen:
                raise _FieldError(f"spec.syncPolicy[{i}].name", f"duplicate metric {sync.name!r}")
            seen.add(sync.name)
        named = [(f"spec.predicate[{i}].name", p.name) for i, p in enumerate(self.predicate)]
        named += [(f"spec.priority[{i}].name", p.name) for i, p in enumerate(self.priority)]
        named += [(f"spec.scoring.{path}", name) for path, name in self.scoring.metrics()]
        for path, name in named:
            if name not in seen:
                raise _FieldError(
                    path, f"metric {name!r} has no syncPolicy entry (its freshness is unknown)"
                )
        self._rebalance_resolves({s.name: s for s in self.sync_policy})
        tlp = self.scoring.target_load_packing
        if tlp is not None:
            sync = next(s for s in self.sync_policy if s.name == tlp.metric)
            if sync.measures != "cpu":
                raise _FieldError(
                    "spec.scoring.targetLoadPacking.metric",
                    f"metric {tlp.metric!r} must measure cpu (set its syncPolicy resource: cpu)",
                )
        return self

    def _rebalance_resolves(self, syncs: dict[str, SyncPolicy]) -> None:
        rebalance = self.rebalance
        for i, threshold in enumerate(rebalance.thresholds):
            path = f"spec.rebalance.thresholds[{i}].metric"
            sync = syncs.get(threshold.metric)
            if sync is None:
                raise _FieldError(path, f"metric {threshold.metric!r} has no syncPolicy entry")
            if sync.measures is None:
                raise _FieldError(
                    path,
                    f"metric {threshold.metric!r} measures no resource "
                    "(set its syncPolicy resource: cpu or memory)",
                )
        if rebalance.enabled and not self.rebalance_thresholds():
            raise _FieldError(
                "spec.rebalance.thresholds",
                "no predicate on an average with a resource to derive one from; give thresholds",
            )

    def rebalance_thresholds(self) -> tuple[RebalanceThreshold, ...]:
        """``spec.rebalance.thresholds``, or one per predicate on an average that measures a
        resource and lets go of a pod once it left (not a maximum), ``high`` its limit."""
        if self.rebalance.thresholds:
            return self.rebalance.thresholds
        syncs = {s.name: s for s in self.sync_policy}
        derived: dict[str, RebalanceThreshold] = {}
        for predicate in self.predicate:
            sync = syncs[predicate.name]
            limit = predicate.max_limit_percent
            if limit and sync.measures and sync.releases and predicate.name not in derived:
                derived[predicate.name] = RebalanceThreshold(metric=predicate.name, high=limit)
        return tuple(derived.values())


class DynamicSchedulerPolicy(Strict):
    """crane-scheduler's DynamicSchedulerPolicy, with loadsched's optional fields."""

    api_version: Literal["scheduler.policy.crane.io/v1alpha1"] = Field(
        default="scheduler.policy.crane.io/v1alpha1", alias="apiVersion"
    )
    """crane's API version."""
    kind: Literal["DynamicSchedulerPolicy"] = "DynamicSchedulerPolicy"
    """crane's kind."""
    spec: PolicySpec
    """The policy."""

    def period_of(self, metric: str) -> timedelta:
        """The sync period of ``metric``; the policy guarantees every named metric has one."""
        for sync in self.spec.sync_policy:
            if sync.name == metric:
                return sync.period
        raise KeyError(metric)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.spec.timestamp_zone)


class _FieldError(LoadschedError, ValueError):
    """Raised from a model validator to point at a nested field by its full path."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


def _loc_to_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


def _first_error(error: ValidationError) -> tuple[str, str]:
    detail = error.errors()[0]
    cause = detail.get("ctx", {}).get("error")
    if isinstance(cause, _FieldError):
        return cause.path, str(cause)
    path = _loc_to_path(tuple(detail["loc"]))
    message = detail["msg"].removeprefix("Value error, ")
    if detail["type"] == "extra_forbidden":
        message = "unknown field"
    elif detail["type"] == "literal_error" and path in ("apiVersion", "kind"):
        message = f"{message}, got {detail.get('input')!r}"
    return path, message


def parse_policy(data: Any, *, source: str = "<policy>") -> DynamicSchedulerPolicy:
    """Validate an already-decoded policy document."""
    if not isinstance(data, dict):
        raise ConfigError(source, "", "the policy must be a YAML mapping with a spec")
    try:
        return DynamicSchedulerPolicy.model_validate(data)
    except ValidationError as e:
        path, message = _first_error(e)
        raise ConfigError(source, path, message) from e


def load_policy(path: str | Path) -> DynamicSchedulerPolicy:
    """Read and validate a policy file. Every problem is a :class:`ConfigError`."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(source, "", f"cannot read the policy file: {e.strerror}") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(source, "", f"not valid YAML: {e}") from e
    return parse_policy(data, source=source)


JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class _PolicySchema(GenerateJsonSchema):
    """Durations as Go spells them, also as defaults; no titles made up from field names."""

    def encode_default(self, dft: Any) -> Any:
        if isinstance(dft, timedelta):
            return format_duration(dft)
        return super().encode_default(dft)

    def field_title_should_be_set(self, _schema: Any) -> bool:
        return False


def policy_json_schema() -> JsonSchemaValue:
    """The policy file's JSON Schema (draft 2020-12), for editors and docs/reference: what
    :func:`parse_policy` accepts, as far as a schema can say (metric names that resolve and
    known time zones are checked only at load time)."""
    schema = DynamicSchedulerPolicy.model_json_schema(by_alias=True, schema_generator=_PolicySchema)
    return {"$schema": JSON_SCHEMA_DIALECT, **schema}


def default_policy() -> DynamicSchedulerPolicy:
    """crane-scheduler's shipped default policy."""
    return parse_policy(yaml.safe_load(DEFAULT_POLICY_YAML), source="<default policy>")


DEFAULT_POLICY_YAML = """\
apiVersion: scheduler.policy.crane.io/v1alpha1
kind: DynamicSchedulerPolicy
spec:
  syncPolicy:
    - name: cpu_usage_avg_5m
      period: 3m
    - name: cpu_usage_max_avg_1h
      period: 15m
    - name: cpu_usage_max_avg_1d
      period: 3h
    - name: mem_usage_avg_5m
      period: 3m
    - name: mem_usage_max_avg_1h
      period: 15m
    - name: mem_usage_max_avg_1d
      period: 3h
  predicate:
    - name: cpu_usage_avg_5m
      maxLimitPecent: 0.65
    - name: cpu_usage_max_avg_1h
      maxLimitPecent: 0.75
    - name: mem_usage_avg_5m
      maxLimitPecent: 0.65
    - name: mem_usage_max_avg_1h
      maxLimitPecent: 0.75
  priority:
    - name: cpu_usage_avg_5m
      weight: 0.2
    - name: cpu_usage_max_avg_1h
      weight: 0.3
    - name: cpu_usage_max_avg_1d
      weight: 0.5
    - name: mem_usage_avg_5m
      weight: 0.2
    - name: mem_usage_max_avg_1h
      weight: 0.3
    - name: mem_usage_max_avg_1d
      weight: 0.5
  hotValue:
    - timeRange: 5m
      count: 5
    - timeRange: 1m
      count: 2
"""

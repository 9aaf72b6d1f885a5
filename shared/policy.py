"""The scheduling policy: crane-scheduler's ``DynamicSchedulerPolicy`` file, accepted as-is,
plus loadsched's own optional fields beside crane's.

A crane file loads unchanged (including the ``maxLimitPecent`` spelling). Unknown fields and
invalid values are rejected at load time with a :class:`~shared.errors.ConfigError` that names
the file and the field, e.g. ``policy.yaml: spec.syncPolicy[1].period: must be > 0``.
crane's parts are in :mod:`shared.crane_policy`; loadsched's own in
:mod:`shared.placement_policy` and :mod:`shared.rebalance_policy`.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue

from shared.annotation_keys import HOT_VALUE_KEY as HOT_VALUE_KEY
from shared.annotation_keys import NODE_LIMITS_KEY as NODE_LIMITS_KEY
from shared.crane_policy import (
    HotValuePolicy,
    PredicatePolicy,
    PriorityPolicy,
    SyncPolicy,
)
from shared.durations import format_duration
from shared.errors import ConfigError, LoadschedError
from shared.placement_policy import EstimationPolicy, ScoringPolicy
from shared.policy_fields import Strict
from shared.rebalance_policy import RebalancePolicy, RebalanceThreshold

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

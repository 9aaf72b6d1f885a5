"""The scheduling policy: crane-scheduler's ``DynamicSchedulerPolicy`` file, accepted as-is,
plus loadsched's own optional fields beside crane's.

A crane file loads unchanged (including the ``maxLimitPecent`` spelling). Unknown fields and
invalid values are rejected at load time with a :class:`~shared.errors.ConfigError` that names
the file and the field, e.g. ``policy.yaml: spec.syncPolicy[1].period: must be > 0``.
"""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from shared.durations import parse_duration
from shared.errors import ConfigError, LoadschedError

HOT_VALUE_KEY = "node_hot_value"
EXTRA_ACTIVE_PERIOD = timedelta(minutes=5)
"""A metric value stays fresh for its sync period plus this (crane's ExtraActivePeriod)."""
HOT_VALUE_ACTIVE_PERIOD = timedelta(minutes=5)
"""The hot value annotation stays fresh this long (crane's DefautlHotVauleActivePeriod)."""


def _go_duration(value: Any) -> timedelta:
    if isinstance(value, timedelta):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a Go duration string such as 30s, 3m or 1h30m")
    return parse_duration(value)


GoDuration = Annotated[timedelta, BeforeValidator(_go_duration)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SyncPolicy(_Strict):
    """How often one metric is synced from Prometheus onto node annotations."""

    name: str = Field(min_length=1)
    period: GoDuration
    promql: str | None = None
    """loadsched: a PromQL expression used instead of the recording rule named ``name``."""
    scale: float | None = None
    """loadsched: divide query results by this (default 100: recording rules give percent)."""

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


class PredicatePolicy(_Strict):
    """Filter: a node whose usage of ``name`` is above ``max_limit_percent`` is overloaded."""

    name: str = Field(min_length=1)
    max_limit_percent: float = Field(
        validation_alias=AliasChoices("maxLimitPecent", "maxLimitPercent"),
        serialization_alias="maxLimitPecent",
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


class PriorityPolicy(_Strict):
    """Score: this metric's weight in the node score."""

    name: str = Field(min_length=1)
    weight: float

    @field_validator("weight")
    @classmethod
    def _non_negative(cls, value: float) -> float:
        if not math.isfinite(value) or value < 0:
            raise ValueError("must be a non-negative number")
        return value


class HotValuePolicy(_Strict):
    """Every ``count`` pods bound to a node within ``time_range`` add 1 to its hot value."""

    time_range: GoDuration = Field(alias="timeRange")
    count: int

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


class EstimationPolicy(_Strict):
    """loadsched: estimate the load of pods bound after a metric's sample (off by default)."""

    enabled: bool = False
    factor: float = 1.0
    """Fraction of a pod's request assumed to be in use once it runs."""

    @field_validator("factor")
    @classmethod
    def _factor_range(cls, value: float) -> float:
        if not (math.isfinite(value) and 0 <= value <= 1):
            raise ValueError("must be between 0 and 1")
        return value


StaleData = Literal["failOpen", "failClosed"]


class PolicySpec(_Strict):
    sync_policy: tuple[SyncPolicy, ...] = Field(default=(), alias="syncPolicy")
    predicate: tuple[PredicatePolicy, ...] = ()
    priority: tuple[PriorityPolicy, ...] = ()
    hot_value: tuple[HotValuePolicy, ...] = Field(default=(), alias="hotValue")
    stale_data: StaleData = Field(default="failOpen", alias="staleData")
    """loadsched: what filter does with a missing or stale value; crane's behaviour is failOpen."""
    timestamp_zone: str = Field(default="UTC", alias="timestampZone")
    """loadsched: the zone annotation timestamps are written in. crane writes local wall
    time with a literal ``Z`` (``Asia/Shanghai`` by default); set that zone to share a
    cluster with crane."""
    estimation: EstimationPolicy = EstimationPolicy()
    hot_value_limit: int = Field(default=0, alias="hotValueLimit", ge=0)
    """loadsched: filter refuses a node whose fresh hot value is above this (pods were just
    bound there and its metrics do not show them yet); 0 is off, crane's behaviour."""

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
        named = [("predicate", i, p.name) for i, p in enumerate(self.predicate)]
        named += [("priority", i, p.name) for i, p in enumerate(self.priority)]
        for section, i, name in named:
            if name not in seen:
                raise _FieldError(
                    f"spec.{section}[{i}].name",
                    f"metric {name!r} has no syncPolicy entry (its freshness is unknown)",
                )
        return self


class DynamicSchedulerPolicy(_Strict):
    api_version: Literal["scheduler.policy.crane.io/v1alpha1"] = Field(
        default="scheduler.policy.crane.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["DynamicSchedulerPolicy"] = "DynamicSchedulerPolicy"
    spec: PolicySpec

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

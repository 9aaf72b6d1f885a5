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
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue

from shared.annotation_keys import HOT_VALUE_KEY as HOT_VALUE_KEY
from shared.annotation_keys import NODE_LIMITS_KEY as NODE_LIMITS_KEY
from shared.durations import GO_DURATION_PATTERN, format_duration, parse_duration
from shared.errors import ConfigError, LoadschedError
from shared.quantity import parse_quantity

EXTRA_ACTIVE_PERIOD = timedelta(minutes=5)
"""A metric value stays fresh for its sync period plus this (crane's ExtraActivePeriod)."""
HOT_VALUE_ACTIVE_PERIOD = timedelta(minutes=5)
"""The hot value annotation stays fresh this long (crane's DefautlHotVauleActivePeriod)."""

Resource = Literal["cpu", "memory"]

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


def _go_duration(value: Any) -> timedelta:
    if isinstance(value, timedelta):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a Go duration string such as 30s, 3m or 1h30m")
    return parse_duration(value)


GoDuration = Annotated[
    timedelta,
    BeforeValidator(_go_duration),
    PlainSerializer(format_duration, when_used="json"),
    WithJsonSchema({"type": "string", "pattern": GO_DURATION_PATTERN}),
]
"""A Go duration (``30s``, ``3m``, ``1h30m``); JSON (and the JSON Schema) spell it so too."""


class _Strict(BaseModel):
    # attribute docstrings become field descriptions in the JSON Schema (make reference)
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class SyncPolicy(_Strict):
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


class PredicatePolicy(_Strict):
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


class PriorityPolicy(_Strict):
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


class HotValuePolicy(_Strict):
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


def _quantity(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError("must be a quantity such as 250m, 1 or 200Mi")
    try:
        quantity = parse_quantity(value)
    except ValueError as e:
        raise ValueError(f"must be a quantity such as 250m, 1 or 200Mi, got {value!r}") from e
    if quantity < 0:
        raise ValueError("must not be negative")
    return float(quantity)


Quantity = Annotated[
    float,
    BeforeValidator(_quantity),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "number", "minimum": 0}]}),
]
"""A Kubernetes quantity (``250m``, ``1``, ``200Mi``) read as a number (cores, bytes)."""


class ResourceFactors(_Strict):
    """Per resource, the fraction of a pod's request assumed in use once it runs."""

    cpu: float = Field(default=0.85, ge=0, le=4, allow_inf_nan=False)
    """Of the CPU request."""
    memory: float = Field(default=0.70, ge=0, le=4, allow_inf_nan=False)
    """Of the memory request."""


class DefaultRequest(_Strict):
    """The estimate for a pod that requests nothing of a resource (cores, bytes)."""

    cpu: Quantity = 0.25
    """Cores (250m)."""
    memory: Quantity = float(200 * 2**20)
    """Bytes (200Mi)."""


class EstimationPolicy(_Strict):
    """loadsched: add an estimate of each pod bound after a metric's sample to the node's value
    until the metric's window covers it (Koordinator's defaults: 85 % of the CPU request, 70 %
    of the memory request; 250m and 200Mi for a pod that requests nothing). Off by default."""

    enabled: bool = False
    """Estimate at all."""
    factors: ResourceFactors = ResourceFactors()
    default_request: DefaultRequest = Field(default=DefaultRequest(), alias="defaultRequest")
    factor: float | None = Field(default=None, ge=0, le=4, allow_inf_nan=False)
    """Earlier spelling: one factor for every resource (``factors`` wins where both are set)."""
    basis: Literal["request", "limit"] = "request"
    """What the factor applies to: the request; or, as Koordinator does, the limit where it is
    above the request (never estimating more than the limit)."""
    when_no_node_has_room: Literal["place", "wait"] = Field(
        default="place", alias="whenNoNodeHasRoom"
    )
    """When no node asked about has room for the pod's own estimate: ``place`` passes the
    nodes under their limits on their own (crane's filter, with the estimates of the pods
    already there), so each takes about one pod past its room and no pod waits on an estimate;
    ``wait`` refuses them all, as Koordinator does, and the pod waits until a node has room."""
    subtract_departed: bool = Field(default=True, alias="subtractDeparted")
    """A pod that left the node (deleted or finished) is taken off the node's value for the
    part of the metric's window it still holds, at its estimate."""
    startup: GoDuration = timedelta(seconds=30)
    """How long after binding a pod that is not Ready yet is still taken as not started: its
    window starts at its Ready time, at the latest this long after binding (a pod uses little
    before it runs; the metric's window does not cover it from the binding)."""

    @field_validator("startup")
    @classmethod
    def _startup_range(cls, value: timedelta) -> timedelta:
        if not timedelta(0) <= value <= timedelta(hours=1):
            raise ValueError("must be between 0s and 1h")
        return value

    def factor_of(self, resource: Resource) -> float:
        if self.factor is not None and resource not in self.factors.model_fields_set:
            return self.factor
        return float(getattr(self.factors, resource))

    def default_of(self, resource: Resource) -> float:
        return float(getattr(self.default_request, resource))


class TargetLoadPacking(_Strict):
    """Trimaran's TargetLoadPacking: pack nodes up to ``targetUtilization`` % CPU."""

    target_utilization: float = Field(default=40, gt=0, lt=100, alias="targetUtilization")
    """The CPU utilization (percent) nodes are packed up to; beyond it, less is better."""
    metric: str = Field(default="cpu_usage_avg_5m", min_length=1)
    """The CPU usage metric read (its average)."""
    default_requests: Quantity = Field(default=1.0, alias="defaultRequests")
    """Cores predicted for a container with neither a CPU limit nor a request (Trimaran: 1)."""
    requests_multiplier: float = Field(
        default=1.5, ge=0, le=100, allow_inf_nan=False, alias="requestsMultiplier"
    )
    """A container with a request and no limit is predicted at request × this (Trimaran: 1.5)."""


class ResourceStatistics(_Strict):
    """The average and standard deviation metrics of one resource."""

    average: str = Field(min_length=1)
    """The metric of the resource's average usage (it needs a syncPolicy entry)."""
    stddev: str = Field(min_length=1)
    """The metric of its standard deviation (it needs a syncPolicy entry)."""


class LoadVariationRiskBalancing(_Strict):
    """Trimaran's LoadVariationRiskBalancing: balance ``(μ + margin·σ^(1/sensitivity)) / 2``."""

    margin: float = Field(default=1, ge=0, le=100, allow_inf_nan=False)
    """How many standard deviations count on top of the average."""
    sensitivity: float = Field(default=1, gt=0, le=100, allow_inf_nan=False)
    """The root taken of the standard deviation (1: none)."""
    cpu: ResourceStatistics | None = ResourceStatistics(
        average="cpu_usage_avg_5m", stddev="cpu_usage_stddev_5m"
    )
    memory: ResourceStatistics | None = ResourceStatistics(
        average="mem_usage_avg_5m", stddev="mem_usage_stddev_5m"
    )


class ScoringPolicy(_Strict):
    """loadsched: a scoring strategy instead of crane's least-loaded score (at most one)."""

    target_load_packing: TargetLoadPacking | None = Field(default=None, alias="targetLoadPacking")
    load_variation_risk_balancing: LoadVariationRiskBalancing | None = Field(
        default=None, alias="loadVariationRiskBalancing"
    )
    normalize: Literal["none", "minMax"] = "none"
    """How a node's 0..100 score becomes the protocol's 0..10: ``none`` is crane's
    ``round(score/10)``; ``minMax`` spreads the nodes asked about over the whole 0..10 (lowest
    0, highest 10), so that loads a few points apart are told apart."""

    @model_validator(mode="after")
    def _at_most_one(self) -> ScoringPolicy:
        if self.target_load_packing is not None and self.load_variation_risk_balancing is not None:
            raise ValueError("give targetLoadPacking or loadVariationRiskBalancing, not both")
        return self

    def metrics(self) -> list[tuple[str, str]]:
        """(field path under spec.scoring, metric name) of every metric the strategy reads."""
        named: list[tuple[str, str]] = []
        if self.target_load_packing is not None:
            named.append(("targetLoadPacking.metric", self.target_load_packing.metric))
        risk = self.load_variation_risk_balancing
        if risk is not None:
            for resource in ("cpu", "memory"):
                stats = getattr(risk, resource)
                if stats is not None:
                    path = f"loadVariationRiskBalancing.{resource}"
                    named.append((f"{path}.average", stats.average))
                    named.append((f"{path}.stddev", stats.stddev))
        return named


DEFAULT_POD_CPU_QUERY = (
    'sum by (namespace, pod) (irate(container_cpu_usage_seconds_total{container!="", '
    'container!="POD"}[2m]))'
)
"""Cores each pod uses now (its last two samples), from the kubelet's cAdvisor series that
clusters already scrape. Not ``rate(...[5m])``: that divides by the whole range, so a pod
started a minute ago would read as a fifth of what it uses, and the pods that came last, the
usual cause of an overload, would look the lightest."""
DEFAULT_POD_MEMORY_QUERY = (
    'sum by (namespace, pod) (container_memory_working_set_bytes{container!="", container!="POD"})'
)
"""Bytes each pod uses (its working set), from the same series."""
LOW_OF_HIGH = 0.8
"""A threshold's ``low`` when not given: this fraction of its ``high``."""


class RebalanceThreshold(_Strict):
    """A usage a node must not stay above, on one metric with a resource."""

    metric: str = Field(min_length=1)
    """The metric (it needs a syncPolicy entry whose resource is cpu or memory)."""
    high: float = Field(gt=0, le=10, allow_inf_nan=False)
    """A node above this for ``consecutiveRounds`` rounds of fresh data has pods moved off."""
    low: float | None = Field(default=None, ge=0, le=10, allow_inf_nan=False)
    """Until the node is under this, the replacement of a pod moved off it is refused there
    (for ``cooldown`` at most); default 0.8 × ``high``."""

    @model_validator(mode="after")
    def _low_under_high(self) -> RebalanceThreshold:
        if self.low is not None and self.low >= self.high:
            raise ValueError("low must be less than high")
        return self

    @property
    def low_or_default(self) -> float:
        return self.low if self.low is not None else round(self.high * LOW_OF_HIGH, 6)


class RebalanceLimits(_Strict):
    """How many evictions the rebalancer may ask for."""

    per_node: int = Field(default=2, ge=1, le=100, alias="perNode")
    """Pods moved off one node at a time: the node is then held until its metric shows them
    gone (the metric's window and delay after the last eviction)."""
    per_namespace: int = Field(default=2, ge=1, le=1000, alias="perNamespace")
    """Evictions in one namespace per round."""
    per_round: int = Field(default=5, ge=1, le=1000, alias="perRound")
    """Evictions per round, over the cluster."""
    per_minute: float = Field(default=10, gt=0, le=6000, allow_inf_nan=False, alias="perMinute")
    """Evictions a minute, over the cluster (a token bucket)."""


class PodUsageQueries(_Strict):
    """PromQL giving each pod's usage, one series per pod with ``namespace`` and ``pod``."""

    cpu: str = Field(default=DEFAULT_POD_CPU_QUERY, min_length=1)
    """Cores per pod."""
    memory: str = Field(default=DEFAULT_POD_MEMORY_QUERY, min_length=1)
    """Bytes per pod."""


class RebalanceNamespaces(_Strict):
    """Which namespaces' pods may be moved."""

    include: tuple[str, ...] = ()
    """Only these (empty: every namespace not excluded)."""
    exclude: tuple[str, ...] = ("kube-system",)
    """Never these."""


class RebalancePolicy(_Strict):
    """loadsched: move pods off nodes that stay above a usage threshold (the annotator's
    rebalancer). Off by default."""

    enabled: bool = False
    """Run the rebalancer (in the annotator's leader)."""
    dry_run: bool = Field(default=False, alias="dryRun")
    """Compute and show the plan (status, events, logs, metrics); evict nothing."""
    thresholds: tuple[RebalanceThreshold, ...] = ()
    """Per metric; default: every predicate on an average with a resource, ``high`` its
    limit."""
    consecutive_rounds: int = Field(default=5, ge=1, le=1000, alias="consecutiveRounds")
    """Rounds of fresh data a node must stay above ``high`` before pods are moved off it."""
    period: GoDuration = timedelta(minutes=1)
    """How often the rebalancer looks at the nodes (a round)."""
    cooldown: GoDuration = timedelta(minutes=15)
    """How long a workload's replacement is refused on the node it was moved off (until that
    node is under ``low``), and how long before a pod of the same workload is moved again."""
    max_priority: int = Field(default=999_999, alias="maxPriority")
    """Pods of a higher priority are never moved (system-critical ones never are)."""
    namespaces: RebalanceNamespaces = RebalanceNamespaces()
    pod_selector: dict[str, str] = Field(default_factory=dict, alias="podSelector")
    """Only pods with all these labels (empty: any pod)."""
    limits: RebalanceLimits = RebalanceLimits()
    usage: PodUsageQueries = PodUsageQueries()
    """Each pod's measured usage; a pod without a sample counts at its request × the
    estimation factor."""
    grace_seconds: int | None = Field(default=None, ge=0, alias="gracePeriodSeconds")
    """The evicted pods' grace period (default: their own)."""

    @field_validator("period", "cooldown")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be > 0")
        return value


StaleData = Literal["failOpen", "failClosed"]


class PolicySpec(_Strict):
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


class DynamicSchedulerPolicy(_Strict):
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

"""crane-scheduler's parts of the policy, each with loadsched's optional fields beside crane's:
the metrics synced (``syncPolicy``, with their windows and delays), the predicates (crane's
``maxLimitPecent`` spelling included), the priorities and the hot value."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Any

from pydantic import AliasChoices, ConfigDict, Field, field_validator, model_validator

from shared.policy_fields import GoDuration, Resource, Strict

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

    @field_validator("period", "window")
    @classmethod
    def _positive(cls, value: timedelta | None) -> timedelta | None:
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

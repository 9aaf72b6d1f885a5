"""What one strategy's round of bench/quality.py left (:class:`Outcome`), and the readers of
the ``/metrics`` it is completed from: the extender's decisions and times per verb, and
kube-scheduler's mean times per step.

Kept apart from the run itself (:mod:`bench.quality_run`), so the report, the targets and the
saved runs read outcomes without the sandbox.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.quality_moves import Moves
from bench.quality_strategies import Strategy
from sandbox.workload import Recording
from shared.load_model import WITH_POD

DECISIONS = {
    "placed_without_room": ("loadsched_extender_placed_without_room_total", None),
    "refused_for_room": ("loadsched_extender_nodes_filtered_total", WITH_POD),
}
"""What :func:`decision_counts` reads off the extender's metrics: a sample name, and the
``reason`` label its samples must have (``None``: any)."""


def decision_counts(text: str) -> dict[str, float]:
    """From the extender's ``/metrics`` (Prometheus text): filter answers that placed a pod no
    node had room for (``whenNoNodeHasRoom: place``), and node refusals for want of room for a
    pod's estimate, each summed over its labels."""
    counts = dict.fromkeys(DECISIONS, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for key, (name, reason) in DECISIONS.items():
                if sample.name == name and reason in (None, sample.labels.get("reason")):
                    counts[key] += sample.value
    return counts


VERB_SECONDS = "loadsched_extender_request_duration_seconds"


def verb_seconds(text: str) -> dict[str, float]:
    """From the extender's ``/metrics`` (Prometheus text): its mean time per call, by verb
    (seconds; the verbs called at least once), from first body byte to encoded answer; for
    ``bind``, the binding written to the API server included."""
    return histogram_means(
        text, lambda name, labels: labels.get("verb", "") if name == VERB_SECONDS else None
    )


SCHEDULER_STEPS = {
    "algorithm": ("scheduler_scheduling_algorithm_duration_seconds", {}),
    "attempt": ("scheduler_scheduling_attempt_duration_seconds", {"result": "scheduled"}),
    "queued to bound": ("scheduler_pod_scheduling_sli_duration_seconds", {}),
}
"""What :func:`scheduler_seconds` reads off kube-scheduler's metrics: per step, a histogram
and the labels its samples must have. ``algorithm``: filtering and scoring, the extender's
calls included, per attempt (an attempt that found no node too, with its preemption);
``attempt``: per pod scheduled, the algorithm and the binding (the extender's bind verb, for
the strategies that bind through it); ``queued to bound``: per pod, from entering the
scheduling queue to bound, the wait behind the pods before it included."""


def scheduler_seconds(text: str) -> dict[str, float]:
    """From kube-scheduler's ``/metrics`` (Prometheus text): its mean seconds per observation
    of each of :data:`SCHEDULER_STEPS` observed at least once, summed over other labels."""

    def step_of(name: str, labels: Mapping[str, str]) -> str | None:
        for step, (histogram, wanted) in SCHEDULER_STEPS.items():
            if name == histogram and all(labels.get(k) == v for k, v in wanted.items()):
                return step
        return None

    return histogram_means(text, step_of)


def histogram_means(
    text: str, key_of: Callable[[str, Mapping[str, str]], str | None]
) -> dict[str, float]:
    """From Prometheus text: each histogram's mean (``_sum`` / ``_count``), summed per the key
    that ``key_of`` gives its name (without the suffix) and labels; ``None``: not read. Keys
    never observed are left out."""
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for suffix, into in (("_sum", sums), ("_count", counts)):
                if not sample.name.endswith(suffix):
                    continue
                key = key_of(sample.name.removesuffix(suffix), sample.labels)
                if key is not None:
                    into[key] = into.get(key, 0.0) + sample.value
    return {key: sums.get(key, 0.0) / n for key, n in counts.items() if n}


@dataclass
class Outcome:
    strategy: Strategy
    recording: Recording = field(default_factory=Recording)
    latencies: list[float] = field(default_factory=list)
    """Created → bound, seconds, per bound pod."""
    pending: int = 0
    """Pods never bound by the end of the run."""
    bound: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Per pod bound: its node, and when the bench's watch saw it bound (seconds from the
    trace's start, as the recording's times)."""
    created: int = 0
    decisions: dict[str, float] = field(default_factory=dict)
    """What the extender counted over the run (:func:`decision_counts`); empty without one."""
    verbs: dict[str, float] = field(default_factory=dict)
    """The extender's mean seconds per call, by verb, over the run (:func:`verb_seconds`)."""
    scheduler: dict[str, float] = field(default_factory=dict)
    """kube-scheduler's mean seconds by step, over the run (:func:`scheduler_seconds`; each
    strategy starts its own kube-scheduler, which schedules only the trace's pods)."""
    skipped: str | None = None
    """Why the strategy did not run."""
    moves: Moves | None = None
    """What evictions did (:mod:`bench.quality_moves`); ``None`` for runs saved before."""
    rebalancer: dict[str, float] = field(default_factory=dict)
    """What loadsched's rebalancer counted since the annotator started, a few rounds before the
    trace (:func:`bench.quality_rebalancer.rebalancer_counts`); empty without it, or when not
    read."""
    seconds: float = 0.0
    """How long the strategy's round took: reset, start, the trace (0: saved before)."""


def read_metrics(url: str) -> str:
    """The ``/metrics`` text of the server at ``url``."""
    with httpx.Client(base_url=url, timeout=10) as client:
        return client.get("/metrics").raise_for_status().text

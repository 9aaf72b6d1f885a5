"""What the rebalancer did in a bench/quality.py round, from the annotator's ``/metrics`` at
the round's end (:func:`rebalancer_counts`, :func:`rebalanced`), and the logs of the movers
(loadsched's annotator, the descheduler) kept beside the results (:class:`KeptLog`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from annotator.rebalance.controller import NODE_STATES

PREFIX = "loadsched_annotator_rebalance_"
COUNTED = {
    f"{PREFIX}rounds_total": ("rounds", None),
    f"{PREFIX}node_rounds_total": ("node-rounds", "state"),
    f"{PREFIX}evictions_total": ("evictions", "result"),
    f"{PREFIX}candidates_skipped_total": ("skipped", "reason"),
}
"""The counters read: a sample name, and the key it is summed under (with the label that
splits it, if any: ``node-rounds:over``, ``evictions:evicted``, ``skipped:no-target``)."""


def rebalancer_counts(text: str) -> dict[str, float]:
    """From the annotator's ``/metrics`` (Prometheus text): its rebalancer's rounds, each
    node's rounds by state, evictions by result and candidates skipped by reason (summed over
    the other labels; only what is non-zero, rounds always)."""
    counts: dict[str, float] = {"rounds": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            counted = COUNTED.get(sample.name)
            if counted is None or not sample.value:
                continue
            key, label = counted
            if label is not None:
                key = f"{key}:{sample.labels.get(label, '')}"
            counts[key] = counts.get(key, 0.0) + sample.value
    return counts


def _by_label(counts: dict[str, float], kind: str) -> str:
    """``kind``'s counts, each before its label (``2 over, 150 under``); node states in the
    rebalancer's order, the rest by name."""
    prefix = f"{kind}:"
    shown = [(k.removeprefix(prefix), v) for k, v in sorted(counts.items()) if k.startswith(prefix)]
    if kind == "node-rounds":
        order = {state: n for n, state in enumerate(NODE_STATES)}
        shown.sort(key=lambda kv: order.get(kv[0], len(order)))
    return ", ".join(f"{value:.0f} {name}" for name, value in shown) or "none"


def rebalanced(counts: dict[str, float], rounds_needed: int) -> str:
    """One line of what the rebalancer saw and did, and, when it evicted nothing, why: it ran
    no round; no node stayed over its ``high`` for ``rounds_needed`` rounds of fresh data; the
    evictions it asked for were refused (blocked, throttled, failed); no other node had room
    for the pods that would bring a node under; or no pod on the nodes over could move."""
    line = (
        f"the rebalancer's {counts.get('rounds', 0):.0f} rounds: node-rounds "
        f"{_by_label(counts, 'node-rounds')}; evictions {_by_label(counts, 'evictions')}; "
        f"candidates skipped {_by_label(counts, 'skipped')}"
    )
    if counts.get("evictions:evicted", 0) or counts.get("evictions:dry-run", 0):
        return line
    if not counts.get("rounds", 0):
        return f"{line} (the rebalancer ran no round)"
    if not counts.get("node-rounds:over", 0):
        waited = counts.get("node-rounds:waiting", 0)
        return (
            f"{line} (no node stayed above a high threshold for {rounds_needed} rounds of fresh "
            f"data{f'; {waited:.0f} node-rounds above it for fewer' if waited else ''})"
        )
    if any(key.startswith("evictions:") for key in counts):
        return f"{line} (nodes were over, but the evictions asked for were refused)"
    if counts.get("skipped:no-target", 0):
        return (
            f"{line} (nodes were over, but no other node had room for the pods that would "
            "bring them under)"
        )
    return f"{line} (nodes were over, but none of their pods could move)"


@dataclass
class KeptLog:
    """A log a process appends to, kept from a point on: what it wrote since is copied out."""

    source: Path
    offset: int = 0

    @classmethod
    def from_now(cls, source: Path) -> KeptLog:
        return cls(source, source.stat().st_size if source.exists() else 0)

    def keep(self, target: Path) -> Path | None:
        """Copy what the log got since to ``target``; ``None`` if it got nothing."""
        if not self.source.exists():
            return None
        with self.source.open("rb") as log:
            if self.source.stat().st_size < self.offset:  # cut short since: all of it is new
                self.offset = 0
            log.seek(self.offset)
            written = log.read()
        if not written:
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(written)
        return target

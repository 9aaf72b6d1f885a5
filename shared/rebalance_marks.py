"""The rebalancer's mark on a node a pod was moved off, ``loadsched.io/rebalanced-from``
(``{"<namespace>/<Kind>/<name>": "<until>"}``): the extender's filter refuses that workload's
pods there until the mark's time, which the rebalancer ends early once the node is under
``low``. Pure: time is passed in."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

MOVABLE_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "Job", "ReplicationController"})
"""Owners that recreate a pod evicted from under them."""


def encode_departures(marks: Mapping[str, datetime]) -> str:
    """``{"<namespace>/<Kind>/<name>": "<until, RFC 3339 UTC>"}``, sorted by workload."""
    return json.dumps(
        {k: marks[k].astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for k in sorted(marks)},
        separators=(",", ":"),
    )


def decode_departures(raw: str | None) -> dict[str, datetime]:
    """The marks of a ``loadsched.io/rebalanced-from`` value; a malformed value or entry is
    none (the mark only ever refuses, so reading too little is the safe side)."""
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    marks: dict[str, datetime] = {}
    for key, until in data.items():
        if not isinstance(until, str):
            continue
        try:
            moment = datetime.strptime(until, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            continue
        marks[str(key)] = moment
    return marks


def workload_key(namespace: str, owners: Iterable[tuple[str, str]]) -> str | None:
    """``<namespace>/<Kind>/<name>`` of the first owner that recreates the pod, or ``None``."""
    for kind, name in owners:
        if kind in MOVABLE_OWNERS and name:
            return f"{namespace}/{kind}/{name}"
    return None


def refused_here(workload: str | None, marks: Mapping[str, datetime], now: datetime) -> bool:
    """Whether a pod of ``workload`` is refused on a node carrying ``marks``."""
    if workload is None:
        return False
    until = marks.get(workload)
    return until is not None and now < until


def departure_message(node: str, workload: str, until: datetime) -> str:
    return (
        f"node[{node}]: a pod of {workload} was moved off this node by the rebalancer; "
        f"its replacement is refused here until {until.strftime('%Y-%m-%dT%H:%M:%SZ')} "
        "(or the node is under its low threshold)"
    )

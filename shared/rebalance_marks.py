"""The rebalancer's mark on a node a pod was moved off, ``loadsched.io/rebalanced-from``
(``{"<namespace>/<Kind>/<name>": "<until>"}``): the extender's filter refuses that workload's
pods there until the mark's time, which the rebalancer ends early once the node is under
``low``. Pure: time is passed in.

Beside it, ``loadsched.io/rebalanced-usage`` (``{"<namespace>/<Kind>/<name>": {"cpu": <cores>,
"memory": <bytes>}}``) carries what the moved pod used: while the mark holds, the filter asks
the workload's replacement, on every node, for room for at least that much. Estimation alone
would ask for its request × the factor, and a pod moved because it uses far more than its
request would be placed as if it did not, onto a node it then overloads."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from shared.estimation import Need

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
    marks: dict[str, datetime] = {}
    for key, until in _json_object(raw).items():
        if not isinstance(until, str):
            continue
        try:
            moment = datetime.strptime(until, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            continue
        marks[str(key)] = moment
    return marks


MAX_AMOUNT = 1e18
"""Larger amounts (cores or bytes) are not a pod's usage: the entry is ignored."""


def encode_usages(usages: Mapping[str, Need]) -> str:
    """``{"<namespace>/<Kind>/<name>": {"cpu": <cores>, "memory": <bytes>}}``, sorted by
    workload; cores up to the next millicore, bytes up to the next whole one."""
    return json.dumps(
        {
            k: {"cpu": _up(usages[k].cpu * 1000) / 1000, "memory": _up(usages[k].memory)}
            for k in sorted(usages)
        },
        separators=(",", ":"),
    )


def _up(amount: float) -> int:
    """``amount`` up to the next whole number (float noise below a millionth is not a part)."""
    return math.ceil(round(amount, 6))


def decode_usages(raw: str | None) -> dict[str, Need]:
    """The usages of a ``loadsched.io/rebalanced-usage`` value; a malformed value is none and a
    malformed entry is left out (the usage only ever asks for more room, so reading too little
    is the safe side). A resource missing from an entry is 0."""
    data = _json_object(raw)
    usages: dict[str, Need] = {}
    for key, entry in data.items():
        if not isinstance(entry, dict):
            continue
        cpu, memory = _amount(entry.get("cpu", 0)), _amount(entry.get("memory", 0))
        if cpu is None or memory is None:
            continue
        usages[str(key)] = Need(cpu, memory)
    return usages


def _json_object(raw: str | None) -> dict[str, object]:
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _amount(value: object) -> float | None:
    """A non-negative finite number (not a boolean) up to :data:`MAX_AMOUNT`, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        amount = float(value)
    except OverflowError:  # an integer too large for a float
        return None
    if not math.isfinite(amount) or not 0 <= amount <= MAX_AMOUNT:
        return None
    return amount


def carried_need(
    workload: str | None,
    marks: Mapping[str, Mapping[str, datetime]],
    usages: Mapping[str, Mapping[str, Need]],
    now: datetime,
) -> Need | None:
    """The most a pod of ``workload`` used on a node it was moved off whose mark still holds
    (each resource on its own), or ``None``: ``marks`` and ``usages`` are by node."""
    if workload is None:
        return None
    carried: Need | None = None
    for node, node_marks in marks.items():
        usage = usages.get(node, {}).get(workload)
        if usage is None or not refused_here(workload, node_marks, now):
            continue
        carried = usage if carried is None else carried.at_least(usage)
    return carried


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

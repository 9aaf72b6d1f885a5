"""The plugin's tables, from the JSON the extender answers. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from shared.quantity import format_quantity


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    lines = [header, *rows]
    return "".join(
        "   ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        + "\n"
        for line in lines
    )


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def reading(metric: dict[str, Any]) -> str:
    """``0.452 (12s)``, ``0.30+0.05 (12s)`` with an estimate (``-`` for pods gone), or the
    state (``stale``)."""
    if metric["value"] is None:
        return str(metric["state"])
    value = f"{metric['measured']:.3f}"
    if metric["estimated"]:
        value += f"{metric['estimated']:+.3f}"
    return f"{value} ({age(metric['age_seconds'])})"


def verdict(node: dict[str, Any]) -> str:
    return "passes" if node["passed"] else f"rejected: {node['rejected_by']}"


def explain_table(result: dict[str, Any]) -> str:
    quota = result["quota"]
    head = [
        f"pod {result['pod']}"
        + (" (DaemonSet: load never rejects it)" if result["daemonset"] else ""),
        f"elastic quota: {quota['rule']}: {quota['message']}",
    ]
    estimate = result.get("estimate")
    if estimate:
        memory = format_quantity("memory", Fraction(estimate["memory"]).limit_denominator())
        line = f"estimate: {estimate['cpu']:.3g} cores, {memory} once it runs"
        if result.get("placed_without_room"):
            line += "; no node has room for it: the nodes under their limits on their own pass it"
        head.append(line)
    rows = []
    for node in result["nodes"]:
        score = node["score"]
        decided = [m for m in node["metrics"] if m["decided"]]
        why = node["reason"] or ""
        if decided:
            m = decided[0]
            why = f"{m['metric']} {reading(m)} > {m['limit']:g} ({m['limit_from']})"
        rows.append(
            [
                node["node"],
                verdict(node),
                str(score["final"]),
                str(score["score"]),
                f"{score['hot_value']:g} (-{score['hot_penalty']})",
                str(node["placed"]),
                why if not node["passed"] or result.get("placed_without_room") else "",
            ]
        )
    header = ["NODE", "VERDICT", "SCORE", "OF 100", "HOT", "ESTIMATED PODS", "WHY"]
    return "\n".join(head) + "\n\n" + table(header, rows)


def nodes_table(result: dict[str, Any]) -> str:
    metrics: list[str] = []
    for node in result["nodes"]:
        for m in node["metrics"]:
            if m["metric"] not in metrics:
                metrics.append(m["metric"])
    rows = []
    for node in sorted(result["nodes"], key=lambda n: n["node"]):
        by_name: dict[str, dict[str, Any]] = {}
        for m in node["metrics"]:
            by_name.setdefault(m["metric"], m)
        rows.append(
            [
                node["node"],
                *(reading(by_name[n]) if n in by_name else "-" for n in metrics),
                f"{node['score']['hot_value']:g}",
                verdict(node),
                str(node["score"]["final"]),
            ]
        )
    return table(["NODE", *(m.upper() for m in metrics), "HOT", "VERDICT", "SCORE"], rows)


def quotas_table(quotas: dict[str, Any]) -> str:
    """One row per namespace and resource, as the status page shows them (a namespace over its
    ``min`` in any resource is a borrower); then the pool and the quotas the extender ignores."""
    if not quotas["enabled"]:
        return "elastic quotas are off on this extender (--elastic-quota)\n"
    rows = [
        [
            item["namespace"] + (" (borrower)" if item["borrower"] else ""),
            resource,
            r["used"],
            r["min"],
            r["max"] or "none",
            r["borrowed"],
            r["lent"],
        ]
        for item in quotas["items"]
        for resource, r in sorted(item["resources"].items())
    ]
    header = ["NAMESPACE", "RESOURCE", "USED", "MIN", "MAX", "BORROWED", "LENT"]
    text = table(header, rows) if rows else "no elastic quotas\n"
    pool = quotas["pool"]
    if pool:
        summed = ", ".join(f"{r} used {v['used']} of {v['min']}" for r, v in sorted(pool.items()))
        text += f"\npool (every quota's min, summed): {summed}\n"
    for bad in quotas["invalid"]:
        text += f"{bad['namespace']}/{bad['name']}: ignored: {bad['reason']}\n"
    return text


def rebalance_table(status: dict[str, Any]) -> str:
    """The nodes over a threshold, the plan (each pod, its usage, its target), the last
    evictions: what ``/v1/status?part=rebalance`` says, for a terminal."""
    if not status.get("published"):
        return f"no rebalancer status: {status.get('reason', 'unknown')}\n"
    mode = "DRY RUN: nothing is evicted; the plan is what would be" if status["dryRun"] else "on"
    text = f"rebalancer {mode}; last round {status['roundAt']}\n"
    counts = ", ".join(f"{state} {n}" for state, n in status["nodes"].items())
    text += f"nodes: {counts}\n\n"
    rows = [
        [
            node["node"],
            node["state"],
            m["metric"],
            "-" if m["value"] is None else f"{m['value']:.3f}",
            f"{m['high']:g}",
            str(m["rounds"]),
        ]
        for node in status["overThreshold"]
        for m in node["metrics"]
        if m["value"] is not None and m["value"] > m["high"]
    ]
    text += (
        table(["NODE", "STATE", "METRIC", "VALUE", "HIGH", "ROUNDS"], rows)
        if rows
        else ("no node above a threshold\n")
    )
    moves = [
        [
            plan["node"],
            move["pod"],
            f"{move['usage']:.3g}" + ("" if move["measured"] else " (est.)"),
            move["target"],
            f"{move['valueAfter']:.3f}",
        ]
        for plan in status["plans"]
        for move in plan["moves"]
    ]
    if moves:
        text += "\nplan:\n" + table(["FROM", "POD", "USAGE", "TO", "TO AFTER"], moves)
    for plan in status["plans"]:
        for left in plan["unplaced"]:
            text += f"{plan['node']}: {left['pod']} not moved: {left['why']}\n"
    if status["lastEvictions"]:
        rows = [
            [e["at"], e["pod"], e["node"], e["target"], e["metric"], e["result"]]
            for e in status["lastEvictions"]
        ]
        text += "\nlast evictions:\n" + table(["AT", "POD", "FROM", "TO", "METRIC", "RESULT"], rows)
    return text

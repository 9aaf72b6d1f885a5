"""The demo's table (terminal) and chart (a self-contained HTML page with SVG bars)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Row:
    """One node: its measured load and how many pods each scheduler placed there."""

    node: str
    cpu: float
    mem: float
    overloaded: bool
    plain: int
    loadsched: int


def summary(rows: Sequence[Row]) -> tuple[int, int, int]:
    total = sum(r.plain for r in rows)
    return (
        total,
        sum(r.plain for r in rows if r.overloaded),
        sum(r.loadsched for r in rows if r.overloaded),
    )


def render_table(rows: Sequence[Row]) -> str:
    lines = [
        f"{'node':<8} {'cpu 5m':>7} {'mem 5m':>7}  {'overloaded':<10} {'plain':>6} {'loadsched':>10}",
        "-" * 56,
    ]
    for r in rows:
        lines.append(
            f"{r.node:<8} {r.cpu:7.0%} {r.mem:7.0%}  {'yes' if r.overloaded else '':<10} {r.plain:>6} {r.loadsched:>10}"
        )
    total, plain_over, ours_over = summary(rows)
    lines += [
        "-" * 56,
        f"pods placed on overloaded nodes: plain kube-scheduler {plain_over} of {total}, "
        f"with loadsched {ours_over} of {total}",
    ]
    return "\n".join(lines)


def render_svg(rows: Sequence[Row]) -> str:
    """The chart on its own, a standalone SVG (the README's picture): per node its load and
    the pods each scheduler placed there, overloaded nodes in red, and the summary line."""
    width, bar_h, gap, left, top = 800, 16, 14, 230, 70
    most = max([r.plain for r in rows] + [r.loadsched for r in rows] + [1])
    scale = (width - left - 60) / most
    total, plain_over, ours_over = summary(rows)
    parts = [
        f'<rect width="{width}" height="{{height}}" fill="#ffffff"/>',
        '<text x="10" y="22" font-size="16" font-weight="bold">Pods per node: plain '
        "kube-scheduler vs. loadsched</text>",
        f'<text x="10" y="44" font-size="13">pods on overloaded nodes (red): plain {plain_over} '
        f"of {total} · with loadsched {ours_over} of {total}</text>",
        f'<rect x="{left}" y="52" width="14" height="14" fill="#95a5a6"/>'
        f'<text x="{left + 20}" y="64" font-size="13">plain kube-scheduler</text>'
        f'<rect x="{left + 190}" y="52" width="14" height="14" fill="#27ae60"/>'
        f'<text x="{left + 210}" y="64" font-size="13">with loadsched</text>',
    ]
    y = top + 10
    for r in rows:
        color = "#c0392b" if r.overloaded else "#2c3e50"
        label = f"{r.node}  cpu {r.cpu:.0%} · mem {r.mem:.0%}"
        parts.append(
            f'<text x="10" y="{y + bar_h}" fill="{color}" font-size="13">{html.escape(label)}</text>'
        )
        for offset, count, fill in ((0, r.plain, "#95a5a6"), (bar_h + 2, r.loadsched, "#27ae60")):
            parts.append(
                f'<rect x="{left}" y="{y + offset}" width="{count * scale:.1f}" height="{bar_h}" fill="{fill}"/>'
            )
            parts.append(
                f'<text x="{left + count * scale + 6:.1f}" y="{y + offset + 12}" font-size="12">{count}</text>'
            )
        y += 2 * bar_h + gap
    height = y + 10
    body = "\n".join(parts).replace("{height}", str(height))
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="pods per node" '
        f'font-family="system-ui, sans-serif" fill="#2c3e50">\n{body}\n</svg>\n'
    )


def render_html(rows: Sequence[Row]) -> str:
    """A page around :func:`render_svg`, with what the chart shows."""
    total, _, _ = summary(rows)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>loadsched demo</title>
<style>body{{font-family:system-ui,sans-serif;margin:24px;color:#2c3e50}} .over{{color:#c0392b}}</style></head>
<body>
<p>Same {total} pods, same node load (measured by Prometheus, written to node annotations by the annotator).
Nodes in <span class="over">red</span> are over the policy's limits.</p>
{render_svg(rows)}</body></html>
"""

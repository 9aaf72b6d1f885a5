"""bench/quality.py's traces: the burst trace, ``--quick`` and ``--drift`` (the rebalancer's),
and how the options pick one."""

from __future__ import annotations

from dataclasses import replace

from sandbox.workload import TraceShape

FULL = TraceShape()
QUICK = TraceShape(
    arrivals_for=100.0,
    steady_rate=0.25,
    steady_lifetime=(40.0, 90.0),
    bursts=(10.0,),
    burst_size=(50, 70),
    burst_lifetime=(50.0, 80.0),
)
LASTING = 3600.0
"""A lifetime longer than any round: the pod stays until the round ends."""
DRIFT = TraceShape(
    arrivals_for=150.0,
    steady_rate=0.2,
    steady_lifetime=(LASTING, LASTING),
    bursts=(15.0,),
    burst_size=(50, 70),
    burst_lifetime=(60.0, 90.0),
    growth_share=0.4,
    growth=(1.5, 2.5),
)
"""The rebalancer's trace: lasting pods (services), 40 % of all pods growing after binding, one
burst of short-lived ones. Load that appears after binding and stays, on nodes that stay
overloaded unless a pod moves; :data:`DRIFT_DRAIN` leaves the time to move it."""
SHAPES = {"full": FULL, "quick": QUICK, "drift": DRIFT}
"""The traces by name: the default burst trace, ``--quick`` and ``--drift``."""
DRAIN = 25.0
"""Seconds a trace plays once its arrivals stop, unless ``--drain`` says otherwise."""
DRIFT_DRAIN = 150.0
"""The same for the drift trace."""
SEED = 7
"""The first round's seed unless ``--seed`` says otherwise."""


def trace_settings(
    trace: str, *, growth: float | None, drain: float | None
) -> tuple[TraceShape, float, str]:
    """The trace named (a key of :data:`SHAPES`), the seconds it plays once its arrivals stop,
    and the name its results are recorded under: ``--growth`` and ``--drain`` override the
    trace's own."""
    shape = SHAPES[trace]
    if growth is not None:
        shape = replace(shape, growth_share=growth)
    if drain is None:
        drain = DRIFT_DRAIN if trace == "drift" else DRAIN
    return shape, drain, "quality-drift" if trace == "drift" else "quality"

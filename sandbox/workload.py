"""A simulated workload for the sandbox (kwok runs the pods, nothing runs in them): a seeded
trace of pods, each with its own usage profile, and the true usage of every node as the sum of
its background load and the pods bound to it. Pure: no I/O, time is passed in (seconds since the trace started).

A pod uses nothing until a startup delay after its binding; then it uses its profile's
fraction of its request (some pods a fifth of it, some more than all of it), swinging by an
amplitude over a period; nothing after it is deleted. In a trace with growth, some pods' CPU
use grows by a factor once they have run a while: load that appears after binding, which no
placement sees coming. Node usage is capped at 100 %.

    trace = make_trace(TraceShape(), seed=7)
    usage = node_usage(background, placed_pods, now=42.0, cpus=8, memory=32 * 2**30)
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

GI = 2**30
MI = 2**20


@dataclass(frozen=True)
class Profile:
    """What one pod asks for and what it really uses once started."""

    cpu_request: float
    """Cores."""
    memory_request: float
    """Bytes."""
    kind: str
    """``light`` (a fifth of its request), ``typical`` (half to all of it) or ``hungry`` (more)."""
    cpu_fraction: float
    """Mean CPU use as a fraction of the request."""
    cpu_swing: float
    """Amplitude of the CPU use around its mean, as a fraction of the request."""
    swing_period: float
    """Seconds."""
    memory_fraction: float
    startup: float
    """Seconds from binding until the pod uses anything."""
    lifetime: float
    """Seconds from binding until the trace deletes the pod."""
    grows_after: float | None = None
    """Seconds from its start until its CPU use grows by :attr:`growth`; ``None``: never."""
    growth: float = 1.0


@dataclass(frozen=True)
class Arrival:
    at: float
    """Seconds after the trace starts when the pod is created."""
    name: str
    group: str
    """``steady`` or ``burst-<n>`` (pods of one burst share a Deployment-like size)."""
    profile: Profile


@dataclass(frozen=True)
class TraceShape:
    """The knobs of a trace; the defaults are the bench's full run."""

    arrivals_for: float = 200.0
    """Seconds during which pods arrive."""
    steady_rate: float = 0.25
    """Pods per second, Poisson."""
    steady_lifetime: tuple[float, float] = (50.0, 130.0)
    bursts: tuple[float, ...] = (15.0, 105.0)
    """When each burst is created, seconds after the start."""
    burst_size: tuple[int, int] = (50, 100)
    burst_lifetime: tuple[float, float] = (60.0, 90.0)
    startup: tuple[float, float] = (10.0, 30.0)
    kinds: tuple[tuple[str, float], ...] = (("light", 0.3), ("typical", 0.5), ("hungry", 0.2))
    """Usage kinds and their probabilities."""
    growth_share: float = 0.0
    """The share of pods whose CPU use grows once they have run a while; 0: none."""
    grows_after: tuple[float, float] = (20.0, 40.0)
    """Seconds from a growing pod's start until it grows."""
    growth: tuple[float, float] = (1.5, 2.0)
    """The factor its CPU use grows by."""


@dataclass(frozen=True)
class Trace:
    shape: TraceShape
    seed: int
    arrivals: tuple[Arrival, ...]

    @property
    def bursts(self) -> dict[str, int]:
        """Pods per burst group."""
        sizes: dict[str, int] = {}
        for a in self.arrivals:
            if a.group != "steady":
                sizes[a.group] = sizes.get(a.group, 0) + 1
        return sizes


STEADY_SIZES = ((0.25, 256 * MI), (0.5, 512 * MI), (1.0, 1 * GI))
BURST_SIZES = ((0.2, 256 * MI), (0.3, 384 * MI))


def draw_profile(
    rng: random.Random,
    shape: TraceShape,
    *,
    cpu_request: float,
    memory_request: float,
    lifetime: tuple[float, float],
) -> Profile:
    kinds = [k for k, _ in shape.kinds]
    kind = rng.choices(kinds, weights=[w for _, w in shape.kinds])[0]
    if kind == "light":
        fraction = 0.2
    elif kind == "typical":
        fraction = rng.uniform(0.5, 1.0)
    else:
        fraction = rng.uniform(1.1, 1.6)
    return Profile(
        cpu_request=cpu_request,
        memory_request=memory_request,
        kind=kind,
        cpu_fraction=fraction,
        cpu_swing=fraction * rng.uniform(0.0, 0.3),
        swing_period=rng.uniform(20.0, 60.0),
        memory_fraction=min(fraction, 1.0) * rng.uniform(0.6, 1.0),
        startup=rng.uniform(*shape.startup),
        lifetime=rng.uniform(*lifetime),
    )


def make_trace(shape: TraceShape, *, seed: int) -> Trace:
    """The same seed and shape give the same pods, times and profiles."""
    rng = random.Random(seed)
    arrivals: list[Arrival] = []
    at = rng.expovariate(shape.steady_rate) if shape.steady_rate > 0 else shape.arrivals_for
    while at < shape.arrivals_for:
        cpu, memory = rng.choice(STEADY_SIZES)
        profile = draw_profile(
            rng, shape, cpu_request=cpu, memory_request=memory, lifetime=shape.steady_lifetime
        )
        arrivals.append(Arrival(at, f"steady-{len(arrivals)}", "steady", profile))
        at += rng.expovariate(shape.steady_rate)
    for number, burst_at in enumerate(shape.bursts):
        size = rng.randint(*shape.burst_size)
        cpu, memory = rng.choice(BURST_SIZES)
        for i in range(size):
            profile = draw_profile(
                rng, shape, cpu_request=cpu, memory_request=memory, lifetime=shape.burst_lifetime
            )
            arrivals.append(Arrival(burst_at, f"burst{number}-{i}", f"burst-{number}", profile))
    arrivals.sort(key=lambda a: (a.at, a.name))
    return Trace(shape, seed, tuple(_grown(arrivals, shape, seed)))


def _grown(arrivals: list[Arrival], shape: TraceShape, seed: int) -> list[Arrival]:
    """``arrivals`` with ``growth_share`` of them growing, drawn apart from the rest of the
    trace: the same seed gives the same pods with growth and without."""
    if shape.growth_share <= 0:
        return arrivals
    rng = random.Random(f"growth-{seed}")
    out = []
    for arrival in arrivals:
        if rng.random() < shape.growth_share:
            profile = replace(
                arrival.profile,
                grows_after=rng.uniform(*shape.grows_after),
                growth=rng.uniform(*shape.growth),
            )
            arrival = replace(arrival, profile=profile)
        out.append(arrival)
    return out


@dataclass(frozen=True)
class Load:
    cpu: float
    """Fraction of the node's cores in use."""
    memory: float


def backgrounds(names: Sequence[str], *, seed: int, busy: int = 2) -> dict[str, Load]:
    """Each node's own load before any pod: ``busy`` nodes at 45–55 % CPU, the rest 5–30 %."""
    rng = random.Random(seed)
    hot = set(rng.sample(list(names), k=min(busy, len(names))))
    out = {}
    for name in names:
        cpu = rng.uniform(0.45, 0.55) if name in hot else rng.uniform(0.05, 0.30)
        out[name] = Load(round(cpu, 3), round(rng.uniform(0.15, 0.45), 3))
    return out


def pod_usage(profile: Profile, *, bound_at: float, now: float) -> tuple[float, float]:
    """(cores, bytes) the pod uses at ``now``: nothing before ``bound_at + startup``."""
    started = bound_at + profile.startup
    if now < started:
        return 0.0, 0.0
    phase = 2 * math.pi * (now - started) / profile.swing_period
    cpu = profile.cpu_request * (profile.cpu_fraction + profile.cpu_swing * math.sin(phase))
    if profile.grows_after is not None and now >= started + profile.grows_after:
        cpu *= profile.growth
    return max(cpu, 0.0), profile.memory_request * profile.memory_fraction


@dataclass(frozen=True)
class Placed:
    """A pod bound to a node and not yet deleted."""

    profile: Profile
    bound_at: float


def node_usage(
    background: Load, pods: Iterable[Placed], *, now: float, cpus: float, memory: float
) -> Load:
    """The node's true usage: background plus its pods' use, each capped at 100 %."""
    cpu, mem = background.cpu * cpus, background.memory * memory
    for pod in pods:
        pod_cpu, pod_mem = pod_usage(pod.profile, bound_at=pod.bound_at, now=now)
        cpu += pod_cpu
        mem += pod_mem
    return Load(min(cpu / cpus, 1.0), min(mem / memory, 1.0))


@dataclass
class Recording:
    """True usage sampled over time: ``samples[i]`` is every node's load at ``times[i]``."""

    times: list[float] = field(default_factory=list)
    samples: list[dict[str, Load]] = field(default_factory=list)

    def add(self, now: float, loads: Mapping[str, Load]) -> None:
        self.times.append(now)
        self.samples.append(dict(loads))

    def max_cpu(self) -> list[float]:
        """The busiest node's CPU at each sample."""
        return [max(s[n].cpu for n in s) if s else 0.0 for s in self.samples]


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(math.ceil(q / 100 * len(ordered)), 1)
    return ordered[rank - 1]


@dataclass(frozen=True)
class Quality:
    overload_node_seconds: float
    """Σ over samples and nodes of the time a node spent above a limit (CPU or memory)."""
    cpu_p99: float
    """99th percentile of every node's CPU over every sample."""
    cpu_max: float
    spread: float
    """Time-averaged standard deviation of CPU across nodes."""


def _gaps(times: Sequence[float]) -> list[float]:
    """How long each sample stands for: until the next one (the last for the median gap)."""
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    gaps.append(statistics.median(gaps) if gaps else 1.0)
    return gaps


def _over(load: Load, cpu_limit: float, memory_limit: float) -> bool:
    return load.cpu > cpu_limit or load.memory > memory_limit


def quality(recording: Recording, *, cpu_limit: float, memory_limit: float) -> Quality:
    """Each sample stands for the time until the next one (the last for the median gap)."""
    times, samples = recording.times, recording.samples
    if not samples:
        return Quality(0.0, math.nan, math.nan, math.nan)
    gaps = _gaps(times)
    over = 0.0
    every: list[float] = []
    spread = 0.0
    for gap, sample in zip(gaps, samples, strict=True):
        cpus = [load.cpu for load in sample.values()]
        every += cpus
        over += gap * sum(1 for load in sample.values() if _over(load, cpu_limit, memory_limit))
        spread += gap * (statistics.pstdev(cpus) if len(cpus) > 1 else 0.0)
    return Quality(over, percentile(every, 99), max(every), spread / sum(gaps))


def overload_if_ended(
    recording: Recording, *, cpu_limit: float, memory_limit: float, after: float
) -> float:
    """The overload node-seconds left had every overload ended ``after`` seconds after it began,
    and nothing else changed: an estimate of what something acting on an overload ``after``
    seconds in (a rebalancer waiting for rounds of data over its threshold) could leave, if
    each of its moves ended the overload at once. Not a bound: a real move also changes what
    comes after it (an overload that stops and begins again gets ``after`` seconds anew here).
    An overload is one node above a limit sample after sample (a sample without the node ends
    it); it begins at its first such sample. Weighted as :func:`quality` weighs samples:
    ``after`` = ∞ gives its overload node-seconds."""
    if not recording.samples:
        return 0.0
    began: dict[str, float] = {}
    left = 0.0
    for at, gap, sample in zip(
        recording.times, _gaps(recording.times), recording.samples, strict=True
    ):
        for node, load in sample.items():
            if not _over(load, cpu_limit, memory_limit):
                began.pop(node, None)
                continue
            start = began.setdefault(node, at)
            left += min(gap, max(start + after - at, 0.0))
        for node in began.keys() - sample.keys():  # not sampled: its overload is over
            del began[node]
    return left


def averaged_overload(
    recording: Recording, *, cpu_limit: float, memory_limit: float, window: float = 60.0
) -> float:
    """Node-seconds a node's average over the last ``window`` seconds was above a limit: the
    overload a metric averaged over that window shows (the 1-minute averages a rebalancer
    acts on), not the swings within it. Weighted as :func:`quality` weighs samples; each
    sample's average is over the node's samples of the ``window`` up to it, weighted the same
    way."""
    times, samples = recording.times, recording.samples
    if not samples:
        return 0.0
    gaps = _gaps(times)
    over = 0.0
    start = 0
    for i, (at, gap) in enumerate(zip(times, gaps, strict=True)):
        while times[start] <= at - window:
            start += 1
        span = range(start, i + 1)
        for node in samples[i]:
            held = [j for j in span if node in samples[j]]
            weight = sum(gaps[j] for j in held)
            cpu = sum(samples[j][node].cpu * gaps[j] for j in held) / weight
            memory = sum(samples[j][node].memory * gaps[j] for j in held) / weight
            if _over(Load(cpu, memory), cpu_limit, memory_limit):
                over += gap
    return over

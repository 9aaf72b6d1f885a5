"""Annotator round cost at scale: 5,000 fake nodes, the 6 metrics of crane's default policy,
real Prometheus (evaluating the recording rules over a synthetic exporter) and a real
kube-apiserver.

Per round it prints the Prometheus queries issued, the node writes issued and the wall time of
loadsched's strategy (one query per metric for all nodes, one merge patch per node carrying every
metric). Side by side, in the same run, it times crane's strategy as a bench-only baseline: a
query per node per metric and two patches per node per metric (the value, then the hot value).
The baseline runs on a sample of nodes and is scaled to the whole cluster; the sample size is
printed with it.

Absolute seconds do not carry from one machine to the next, so the round is measured against
its floor, in the same run: the same merge patches (the last round's annotation bodies, with
their timestamps moved so that every patch changes its node), sent at the same concurrency by
``bench/patchfloor``, a Go program that does nothing else (client-go's transport with the
kubeconfig's credentials, answers read and dropped), once over HTTP/1.1 with a connection per
writer as the annotator does, once over one HTTP/2 connection. Rounds and floors take turns
going first. The floor is the protocol that was faster over the run (the lower median), and
each round is divided by that protocol's floor sent beside it; taking the faster of the two in
every round instead would take the luckier of two draws each time, a floor below what either
protocol sends. The target is judged on the median of those ratios (a machine shared with other
work moves single rounds by tens of percent), printed with the interval that holds the ratio's
median (the sign test); every ratio is printed.

Beside the wall times: the client's CPU per patch (the benchmark process's during a round,
queries and matching included; the Go program's own), the API server's and etcd's CPU per
patch (the same patches from either client), and the CPU Prometheus and the rest of the
sandbox used meanwhile; the ratios against the other protocol's floors too. Once the recording
rules cover every node, Prometheus evaluates them every minute instead of the sandbox's 5 s, so
that its work during the rounds is no larger than a production Prometheus's (which runs
elsewhere). The Go program is built with the machine's Go into the cache, keyed by its source.

``--clients direct,httpx`` takes turns each round between the annotator's client (PATCH written
to connections of its own) and the same client with httpx's own transport for every request,
and prints the second's round / floor beside the first's (not judged): what the direct path
buys, measured against the same floors.

    .venv/bin/python -m bench.annotator [--nodes 5000] [--rounds 5] [--baseline-sample 200]
        [--clients direct,httpx]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import uvloop

from annotator.metrics import AnnotatorMetrics
from annotator.objects import NODE_DECODER, Node, NodeStore
from annotator.patching import NodePatcher, kube_client
from annotator.sync.hot_value import BindingWindows
from annotator.sync.prometheus import PrometheusClient
from annotator.sync.rounds import AnnotationSync, MetricSync, RoundReport
from bench.lease_option import add_lease_option, renewals
from bench.results import Figure, measured, record
from bench.stats import median_interval
from bench.targets import target
from sandbox.build import ROOT, cache_root
from sandbox.cluster import Sandbox
from sandbox.loopback import free_port
from sandbox.processes import wait_for
from sandbox.prometheus import Prometheus
from sandbox.specs import NodeSpec
from shared.annotations import encode_hot_value, encode_metric
from shared.kube.config import KubeEndpoint, load_endpoint
from shared.kube.watching import Reflector
from shared.policy import default_policy

ROUND_OF_FLOOR = target("annotator", "round-of-floor")
WRITES_PER_NODE = target("annotator", "writes-per-node")
"""The annotator's round over its floor: the same patches from the least client."""
CONCURRENCY = 8
"""Patches in flight, for the annotator (its default ``--write-concurrency``) and the floor."""
FLOOR_MODULE = Path(__file__).resolve().parent / "patchfloor"
PROTOCOLS = ("HTTP/1.1", "HTTP/2")
"""The floor's two ways of sending: a connection per writer, or one multiplexed connection."""
RULES_EVERY = "1m"
"""How often Prometheus evaluates the recording rules during the rounds."""
FLOOR_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
"""The floor's timestamps count from here, so its patches never equal the annotator's."""


CLIENTS = ("direct", "httpx")


def annotator_client(endpoint: KubeEndpoint, kind: str) -> httpx.AsyncClient:
    """The annotator's client as ``--kube-direct`` (``direct``) or ``--no-kube-direct``
    (``httpx``) builds it; pools sized as annotator.main sizes its own: the writers plus room
    for the watches."""
    return kube_client(endpoint, max_connections=CONCURRENCY + 6, direct=kind == "direct")


class CountingPrometheus(PrometheusClient):
    queries = 0

    async def query(self, promql: str) -> list[tuple[str, float]]:
        self.queries += 1
        return await super().query(promql)


class CountingPatcher(NodePatcher):
    writes = 0
    first_write: float | None = None

    async def patch_annotations(self, node: str, annotations: dict[str, str | None]) -> bool:  # type: ignore[override]
        self.writes += 1
        if self.first_write is None:
            self.first_write = time.perf_counter()
        return await super().patch_annotations(node, annotations)


def ensure_patchfloor() -> Path:
    """``bench/patchfloor`` built into the cache under a hash of its source (once; seconds
    with client-go in the module cache, otherwise fetched through the module proxy)."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        digest.update((FLOOR_MODULE / name).read_bytes())
    target = cache_root() / "patchfloor" / digest.hexdigest()[:16] / "patchfloor"
    if target.is_file():
        return target
    if shutil.which("go") is None:
        raise RuntimeError("Go is needed to build bench/patchfloor: 'go' is not on PATH")
    print("building bench/patchfloor", file=sys.stderr)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_suffix(".building")
    result = subprocess.run(
        ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(staging), "."],
        cwd=FLOOR_MODULE,
        env={**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        staging.unlink(missing_ok=True)
        raise RuntimeError(f"go build of bench/patchfloor failed:\n{result.stderr[-4000:]}")
    staging.rename(target)
    return target


def floor_bodies(annotations: dict[str, dict[str, str | None]], stamp: datetime) -> str:
    """One ``<node>\t<merge patch>`` line per node: the round's bodies, each value's timestamp
    replaced by ``stamp`` (same length), so that every patch changes its node."""
    text = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = []
    for node, values in annotations.items():
        moved = {
            k: None if v is None else f"{v.split(',', 1)[0]},{text}" for k, v in values.items()
        }
        lines.append(
            f"{node}\t{json.dumps({'metadata': {'annotations': moved}}, separators=(',', ':'))}"
        )
    return "\n".join(lines) + "\n"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def run_floor(
    binary: Path, kubeconfig: Path, bodies: Path, *, http2: bool
) -> tuple[float, float]:
    """Seconds the floor took to send every patch in ``bodies`` and the CPU seconds its process
    used; raises if any patch failed."""
    cpu = children_cpu()
    process = await asyncio.create_subprocess_exec(
        str(binary),
        "-kubeconfig",
        str(kubeconfig),
        "-bodies",
        str(bodies),
        "-concurrency",
        str(CONCURRENCY),
        *(["-http2"] if http2 else []),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"patchfloor failed ({process.returncode}): {err.decode()[-2000:]}")
    result = json.loads(out)
    if result["failed"]:
        raise RuntimeError(f"patchfloor: {result['failed']} patches failed: {result}")
    return float(result["seconds"]), children_cpu() - cpu


SERVERS = ("kube-apiserver", "etcd")
"""The processes a patch is served by; every other child of the sandbox is background."""


def server_cpu(before: dict[str, float], after: dict[str, float]) -> tuple[float, float, float]:
    """CPU seconds used between two readings by the API server and etcd, by Prometheus (its
    rule evaluations, and the annotator's queries in a round), and by the rest of the
    sandbox's processes (controller manager, exporter)."""
    used = {name: after[name] - before.get(name, 0.0) for name in after}
    server = sum(used.get(name, 0.0) for name in SERVERS)
    prometheus = used.get("prometheus", 0.0)
    return server, prometheus, sum(used.values()) - server - prometheus


def floor_ratios(
    walls: list[float], floors: dict[str, list[float]]
) -> tuple[str, dict[str, list[float]]]:
    """The protocol judged, the one whose floors have the lowest median; and for each protocol,
    each round's wall over its floor sent beside it (``floors[protocol][i]`` beside ``walls[i]``)."""
    protocol = min(floors, key=lambda p: statistics.median(floors[p]))
    return protocol, {
        name: [wall / floor for wall, floor in zip(walls, sent, strict=True)]
        for name, sent in floors.items()
    }


def nodes(count: int) -> list[NodeSpec]:
    return [
        NodeSpec(f"node-{i:05d}", f"10.{i // 62500}.{(i // 250) % 250}.{i % 250 + 1}")
        for i in range(count)
    ]


async def crane_baseline(
    prometheus: CountingPrometheus,
    patcher: CountingPatcher,
    specs: list[NodeSpec],
    jobs: list[MetricSync],
    port: int,
) -> float:
    """crane's shape of work: per node, per metric, one query, then two patches."""
    limit = asyncio.Semaphore(8)
    now = datetime.now(UTC)

    async def one(spec: NodeSpec, job: MetricSync) -> None:
        async with limit:
            series = await prometheus.query(f'{job.promql}{{instance=~"{spec.ip}:{port}"}}')
            value = series[0][1] / job.scale if series else 0.0
            await patcher.patch_annotations(spec.name, {job.name: encode_metric(value, now)})
            await patcher.patch_annotations(spec.name, {"node_hot_value": encode_hot_value(0, now)})

    started = time.perf_counter()
    await asyncio.gather(*(one(spec, job) for spec in specs for job in jobs))
    return time.perf_counter() - started


async def measure(
    box: Sandbox,
    prometheus_url: str,
    specs: list[NodeSpec],
    rounds: int,
    sample: int,
    port: int,
    floor: Path,
    clients: list[str],
) -> int:
    policy = default_policy()
    jobs = MetricSync.all_from(policy)
    endpoint = load_endpoint(str(box.kubeconfig))
    async with contextlib.AsyncExitStack() as stack:
        kubes = {
            kind: await stack.enter_async_context(annotator_client(endpoint, kind))
            for kind in clients
        }
        store = NodeStore()
        await Reflector[Node](
            client=kubes[clients[0]],
            path="/api/v1/nodes",
            decode=NODE_DECODER.decode,
            store=store,
            name="nodes",
        ).list_once()
        prometheus = CountingPrometheus(prometheus_url, timeout=60)
        patchers = {kind: CountingPatcher(kube) for kind, kube in kubes.items()}
        syncs = {
            kind: AnnotationSync(
                policy=policy,
                prometheus=prometheus,
                nodes=store,
                patcher=patcher,
                windows=BindingWindows(policy.spec.hot_value),
                metrics=AnnotatorMetrics(),
                clock=lambda: datetime.now(UTC),
                may_write=lambda: True,
                concurrency=CONCURRENCY,
            )
            for kind, patcher in patchers.items()
        }
        patcher = patchers[clients[0]]
        print(
            f"annotator round, {len(specs)} nodes, {len(jobs)} metrics (crane's default policy), "
            f"{CONCURRENCY} patches in flight"
        )
        print(
            f"{'strategy':<34} {'queries':>8} {'writes':>8} {'wall s':>8} {'CPU ms/patch':>13} "
            f"{'server ms/patch':>16} {'Prometheus s':>13} {'others s':>9}"
        )
        floors_sent = 0
        bodies = box.workdir / "floor-bodies.txt"

        async def ours(label: str, kind: str = clients[0]) -> tuple[float, RoundReport]:
            nonlocal patcher
            patcher = patchers[kind]
            prometheus.queries = patcher.writes = 0
            patcher.first_write = None
            cpu = time.process_time()
            children = box.supervisor.cpu_seconds()
            started = time.perf_counter()
            report = await syncs[kind].sync(jobs, with_hot=True)
            wall = time.perf_counter() - started
            per_patch = (time.process_time() - cpu) / max(patcher.writes, 1) * 1000
            server, prom, others = server_cpu(children, box.supervisor.cpu_seconds())
            if report.failed_metrics or report.missing:
                missing = sum(map(len, report.missing.values()))
                print(f"  {label}: failed {report.failed_metrics}, missing {missing}")
            print(
                f"{label:<34} {prometheus.queries:>8} {patcher.writes:>8} {wall:>8.2f} {per_patch:>13.3f} "
                f"{server / max(patcher.writes, 1) * 1000:>16.3f} {prom:>13.2f} {others:>9.2f}"
            )
            if patcher.first_write is not None:
                print(f"  (queries and matching: {patcher.first_write - started:.2f} s)")
            return wall, report

        async def floors(label: str, report: RoundReport) -> dict[str, float]:
            nonlocal floors_sent
            sent: dict[str, float] = {}
            for protocol in PROTOCOLS:
                bodies.write_text(
                    floor_bodies(report.annotations, FLOOR_EPOCH + timedelta(seconds=floors_sent))
                )
                floors_sent += 1
                children = box.supervisor.cpu_seconds()
                wall, cpu = await run_floor(
                    floor, box.kubeconfig, bodies, http2=protocol == "HTTP/2"
                )
                server, prom, others = server_cpu(children, box.supervisor.cpu_seconds())
                name = f"floor, Go {protocol}, {label}"
                count = len(report.annotations)
                print(
                    f"{name:<34} {'-':>8} {count:>8} {wall:>8.2f} {cpu / count * 1000:>13.3f} "
                    f"{server / count * 1000:>16.3f} {prom:>13.2f} {others:>9.2f}"
                )
                sent[protocol] = wall
            return sent

        for kind in clients:
            _, last = await ours(f"loadsched, {kind}, warm-up", kind)
        walls_by: dict[str, list[float]] = {kind: [] for kind in clients}
        floors_by: dict[str, list[float]] = {protocol: [] for protocol in PROTOCOLS}
        ours_queries = ours_writes = 0
        for i in range(rounds):
            label = f"round {i + 1}"
            # the clients and the floors take turns going first
            order = clients[i % len(clients) :] + clients[: i % len(clients)]
            sent = {}
            for kind in order:
                if i % 2 == 1 and kind == order[0]:
                    sent = await floors(label, last)
                wall, last = await ours(f"loadsched, {kind}, {label}", kind)
                walls_by[kind].append(wall)
                if kind == clients[0]:
                    ours_queries, ours_writes = prometheus.queries, patcher.writes
            if i % 2 == 0:
                sent = await floors(label, last)
            for protocol, floor_wall in sent.items():
                floors_by[protocol].append(floor_wall)
        walls = walls_by[clients[0]]
        protocol, ratios_by = floor_ratios(walls, floors_by)
        ratios = ratios_by[protocol]
        compared: list[Figure] = []
        for kind in clients[1:]:
            each = floor_ratios(walls_by[kind], floors_by)[1][protocol]
            paired = [a / b for a, b in zip(walls_by[kind], walls, strict=True)]
            low_p, high_p, cover_p = median_interval(paired)
            print(
                f"round / floor ({protocol}) with the {kind} client (not judged): "
                f"{', '.join(f'{r:.2f}x' for r in each)} (median {statistics.median(each):.2f}x, "
                f"interval {'-'.join(f'{v:.2f}' for v in median_interval(each)[:2])}x)"
            )
            print(
                f"round with {kind} / with {clients[0]}, same round: "
                f"{', '.join(f'{r:.2f}' for r in paired)} (median {statistics.median(paired):.2f}; "
                f"it lies in {low_p:.2f}-{high_p:.2f} with {100 * cover_p:.0f} % confidence)"
            )
            compared.append(
                Figure(
                    f"annotator round with the {kind} client / with {clients[0]}, same round",
                    statistics.median(paired),
                    "ratio",
                    interval=(low_p, high_p),
                )
            )
        worst = max(walls)
        subset = random.Random(5).sample(specs, min(sample, len(specs)))
        prometheus.queries = patcher.writes = 0
        base_wall = await crane_baseline(prometheus, patcher, subset, jobs, port)
        scale = len(specs) / len(subset)
        crane_queries, crane_writes, crane_wall = (
            prometheus.queries * scale,
            patcher.writes * scale,
            base_wall * scale,
        )
        print(
            f"{f'crane-style, {len(subset)} nodes':<34} {prometheus.queries:>8} {patcher.writes:>8} {base_wall:>8.2f}"
        )
        print(
            f"{'crane-style, scaled to all nodes':<34} {crane_queries:>8.0f} {crane_writes:>8.0f} {crane_wall:>8.1f}"
        )
        print(
            f"ratios (crane / loadsched): queries {crane_queries / ours_queries:.0f}x, "
            f"writes {crane_writes / ours_writes:.1f}x, wall {crane_wall / worst:.1f}x"
        )
        median = statistics.median(ratios)
        low, high, cover = median_interval(ratios)
        print(
            "floor: Go "
            + ", ".join(f"{p} median {statistics.median(floors_by[p]):.2f} s" for p in PROTOCOLS)
            + f"; the floor is {protocol}"
        )
        for other in PROTOCOLS:
            if other != protocol:
                each = ratios_by[other]
                print(
                    f"round / floor ({other}, not judged): {', '.join(f'{r:.2f}x' for r in each)} "
                    f"(median {statistics.median(each):.2f}x)"
                )
        print(
            f"round / floor ({protocol}): {', '.join(f'{r:.2f}x' for r in ratios)} "
            f"(median {median:.2f}x, worst {max(ratios):.2f}x; the ratio's median lies in "
            f"{low:.2f}-{high:.2f}x with {100 * cover:.0f} % confidence)"
        )
        queries_met = ours_queries == len(jobs)
        writes_met = WRITES_PER_NODE.met(ours_writes / len(specs))
        floor_met = not ROUND_OF_FLOOR.counts(median)
        print(
            f"targets: queries per round = metrics due ({ours_queries} = {len(jobs)}): "
            f"{'met' if queries_met else 'MISSED'}; writes per node ≤ 1 ({ours_writes} for {len(specs)}): "
            f"{'met' if writes_met else 'MISSED'}; round {ROUND_OF_FLOOR.sign} "
            f"{ROUND_OF_FLOOR.bound:g}x its floor (median {median:.2f}x): "
            f"{ROUND_OF_FLOOR.judge(median)}"
        )
        record(
            "annotator",
            [
                measured(
                    ROUND_OF_FLOOR,
                    median,
                    interval=(low, high),
                    name=f"annotator round / Go floor ({protocol}), {len(specs)} nodes",
                ),
                measured(WRITES_PER_NODE, ours_writes / len(specs)),
                Figure("queries per round / metrics due", ours_queries / len(jobs), "ratio"),
                *compared,
            ],
        )
        await prometheus.aclose()
        return 0 if queries_met and writes_met and floor_met else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline-sample", type=int, default=200)
    parser.add_argument(
        "--clients",
        default="direct",
        help="comma-separated clients whose rounds take turns: direct (the annotator's: PATCH "
        "written to its own connections) and httpx (every request through httpx's transport); "
        "the first is judged",
    )
    add_lease_option(parser)
    options = parser.parse_args()
    if options.nodes < 1 or options.rounds < 1 or options.baseline_sample < 1:
        parser.error("--nodes, --rounds and --baseline-sample must be at least 1")
    clients = options.clients.split(",")
    if not clients or any(c not in CLIENTS for c in clients) or len(set(clients)) < len(clients):
        parser.error(f"--clients: a comma-separated list of {', '.join(CLIENTS)}, each once")
    floor = ensure_patchfloor()
    specs = nodes(options.nodes)
    with Sandbox(lease_seconds=options.lease_seconds) as box:
        print(f"creating {len(specs)} nodes", file=sys.stderr)
        print(renewals(len(specs), options.lease_seconds), file=sys.stderr)
        box.create_nodes(specs, workers=16)
        port = 9100
        nodes_file = box.workdir / "nodes.txt"
        nodes_file.write_text("\n".join(f"{s.name}={s.ip}" for s in specs))
        combined = f"127.0.0.1:{free_port()}"
        rng = random.Random(3)
        loads = {
            s.name: {"cpu": rng.uniform(0.05, 0.9), "mem": rng.uniform(0.1, 0.8)} for s in specs
        }
        loads_file = box.workdir / "loads.json"
        loads_file.write_text(json.dumps(loads))
        box.supervisor.start(
            "exporter",
            [
                sys.executable,
                "-m",
                "sandbox.exporter",
                "--control",
                f"127.0.0.1:{free_port()}",
                "--port",
                str(port),
                "--combined",
                combined,
                "--nodes-file",
                str(nodes_file),
                "--loads-file",
                str(loads_file),
            ],
            cwd=ROOT,
        )
        prometheus = Prometheus(box.supervisor, box.workdir / "prometheus", free_port())
        prometheus.start([combined], honor_labels=True, scrape_interval="15s")
        print("waiting for the recording rules to cover every node", file=sys.stderr)
        metrics = [s.name for s in default_policy().spec.sync_policy]
        wait_for(
            lambda: all(
                len(prometheus.query(f"count by (instance) ({m})")) >= len(specs) for m in metrics
            ),
            timeout=300,
            what="recording rules for every node",
            interval=5,
        )
        prometheus.evaluate_every(RULES_EVERY)
        # the event loop the annotator runs on (annotator.cli: uvloop)
        return uvloop.run(
            measure(
                box,
                prometheus.url,
                specs,
                options.rounds,
                options.baseline_sample,
                port,
                floor,
                clients,
            )
        )


if __name__ == "__main__":
    sys.exit(main())

"""Annotator round cost at scale: 5,000 fake nodes, the 6 metrics of crane's default policy,
real Prometheus (evaluating the recording rules over a synthetic exporter) and a real
kube-apiserver.

Per round it prints the Prometheus queries issued, the node writes issued and the wall time of
loadsched's strategy (one query per metric for all nodes, one merge patch per node carrying every
metric). Side by side, in the same run, it times crane's strategy as a bench-only baseline: a
query per node per metric and two patches per node per metric (the value, then the hot value).
The baseline runs on a sample of nodes and is scaled to the whole cluster; the sample size is
printed with it.

    .venv/bin/python bench/annotator.py [--nodes 5000] [--rounds 3] [--baseline-sample 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from annotator.hot_value import BindingWindows  # noqa: E402
from annotator.metrics import AnnotatorMetrics  # noqa: E402
from annotator.objects import NODE_DECODER, Node, NodeStore  # noqa: E402
from annotator.patching import NodePatcher  # noqa: E402
from annotator.prometheus import PrometheusClient  # noqa: E402
from annotator.sync import AnnotationSync, MetricSync  # noqa: E402
from sandbox.cluster import ROOT, NodeSpec, Sandbox, free_port  # noqa: E402
from sandbox.processes import wait_for  # noqa: E402
from sandbox.prometheus import Prometheus  # noqa: E402
from shared.annotations import encode_hot_value, encode_metric  # noqa: E402
from shared.kube.config import load_endpoint  # noqa: E402
from shared.kube.watching import Reflector  # noqa: E402
from shared.policy import default_policy  # noqa: E402

TARGET_SECONDS = 18.0


class CountingPrometheus(PrometheusClient):
    queries = 0

    async def query(self, promql: str) -> list[tuple[str, float]]:
        self.queries += 1
        return await super().query(promql)


class CountingPatcher(NodePatcher):
    writes = 0

    async def patch_annotations(self, node: str, annotations: dict[str, str | None]) -> bool:  # type: ignore[override]
        self.writes += 1
        return await super().patch_annotations(node, annotations)


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
    box: Sandbox, prometheus_url: str, specs: list[NodeSpec], rounds: int, sample: int, port: int
) -> int:
    policy = default_policy()
    jobs = MetricSync.all_from(policy)
    endpoint = load_endpoint(str(box.kubeconfig))
    async with endpoint.client(max_connections=12) as kube:
        store = NodeStore()
        await Reflector[Node](
            client=kube, path="/api/v1/nodes", decode=NODE_DECODER.decode, store=store, name="nodes"
        ).list_once()
        prometheus = CountingPrometheus(prometheus_url, timeout=60)
        patcher = CountingPatcher(kube)
        sync = AnnotationSync(
            policy=policy,
            prometheus=prometheus,
            nodes=store,
            patcher=patcher,
            windows=BindingWindows(policy.spec.hot_value),
            metrics=AnnotatorMetrics(),
            clock=lambda: datetime.now(UTC),
            may_write=lambda: True,
            concurrency=8,
        )
        print(f"annotator round, {len(specs)} nodes, {len(jobs)} metrics (crane's default policy)")
        print(f"{'strategy':<34} {'queries':>8} {'writes':>8} {'wall s':>8}")
        worst = 0.0
        for i in range(rounds):
            prometheus.queries = patcher.writes = 0
            started = time.perf_counter()
            report = await sync.sync(jobs, with_hot=True)
            wall = time.perf_counter() - started
            worst = max(worst, wall)
            if report.failed_metrics or report.missing:
                print(
                    f"  round {i + 1}: failed {report.failed_metrics}, missing {sum(map(len, report.missing.values()))}"
                )
            print(
                f"{f'loadsched, round {i + 1}':<34} {prometheus.queries:>8} {patcher.writes:>8} {wall:>8.2f}"
            )
        ours_queries, ours_writes = prometheus.queries, patcher.writes
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
        print(
            f"targets: queries per round = metrics due ({ours_queries} = {len(jobs)}): "
            f"{'met' if ours_queries == len(jobs) else 'MISSED'}; writes per node ≤ 1 ({ours_writes} for {len(specs)}): "
            f"{'met' if ours_writes <= len(specs) else 'MISSED'}; round ≤ {TARGET_SECONDS:g} s (worst {worst:.2f}): "
            f"{'met' if worst <= TARGET_SECONDS else 'MISSED'}"
        )
        await prometheus.aclose()
        return (
            0
            if ours_queries == len(jobs) and ours_writes <= len(specs) and worst <= TARGET_SECONDS
            else 1
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline-sample", type=int, default=200)
    options = parser.parse_args()
    specs = nodes(options.nodes)
    with Sandbox() as box:
        print(f"creating {len(specs)} nodes", file=sys.stderr)
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
        # the event loop the annotator runs on (annotator.cli: uvloop)
        return uvloop.run(
            measure(box, prometheus.url, specs, options.rounds, options.baseline_sample, port)
        )


if __name__ == "__main__":
    sys.exit(main())

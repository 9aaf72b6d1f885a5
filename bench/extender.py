"""Extender latency: filter + prioritize over real HTTP to a uvicorn server.

For 1,000 and 5,000 real-looking nodes, in names-only mode (nodeCacheCapable: true, nodes from
the extender's watch cache) and full-node mode (whole NodeList in every request), it prints
the server-side time (the extender's Server-Timing header) and the client round trip, p50 and
p99, and checks the targets. ``names-only`` rows send the same node set each call, as
kube-scheduler does pod after pod, and are answered from what the extender keeps until its
node view changes; ``names-miss`` rows send a new set each call (one node left out in turn), so
every answer is computed: the worst case, when the view changes between any two pods. Side by
side, in the same run, it times a naive full pydantic parse of the same request bodies against
the extender's slim msgspec decode, as a ratio.

Churn: a writer changes the load annotations of one node after another at a steady rate,
through the fake API server's watch, while the same scheduler-shaped client measures
names-only filter and prioritize at 5,000 nodes, with no churn, at the production rate
(5,000 nodes every 3 minutes, crane's annotator period: 28 nodes/s) and at 5× that, side by
side. A writer's values cross the policy's limits, so answers really change; afterwards the
extender's answer for every node is checked against the verdicts of the API server's final
objects. ``--kwok-nodes N`` runs only that table, through a sandbox's real kube-apiserver and
etcd holding N nodes whose kubelet is kwok, renewing their Leases every quarter of
``--lease-seconds`` (Lease renewals load the API server as in a cluster): the writer patches
the nodes through the API server and the extender sees them through its watch.

    .venv/bin/python -m bench.extender [--quick] [--churn 28,140] [--churn-only] [--extender-arg=FLAG ...]
    .venv/bin/python -m bench.extender --kwok-nodes 5000 [--lease-seconds 40] [--quick] [--churn 28,140]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import httpx

from bench.fake_apiserver import FakeNodeAPI
from bench.lease_option import add_lease_option, renewals
from bench.naive_models import ExtenderArgs as NaiveArgs
from bench.results import Figure, measured, record
from bench.targets import target
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache
from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import ARGS_DECODER, ENCODER, NODE_DECODER
from sandbox.cluster import Sandbox
from sandbox.specs import NodeSpec
from shared.load_model import LoadRules
from shared.placement_policy import ScoringPolicy
from shared.policy import default_policy
from tests import payloads

TARGETS = {
    ("names-only", 5000): target("extender", "names-only-5000-p99"),
    ("full-node", 1000): target("extender", "full-node-1000-p99"),
}
"""p99 of server-side filter and prioritize, in ms."""

CHURN_TARGET = target("extender", "churn-p99")
"""p99 of server-side filter and prioritize under annotation churn, 5,000 nodes, in ms."""

FIGURES: list[Figure] = []
"""What this run measured, for out/results (:mod:`bench.results`)."""

ANNOTATOR_PERIOD = 180
"""crane's annotator period for the 5-minute metrics, in seconds."""
PRODUCTION_RATE = 5000 / ANNOTATOR_PERIOD
"""Node updates per second of crane's annotator at 5,000 nodes: every node every 3 minutes."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def start_extender(
    kubeconfig: Path, args: tuple[str, ...] = ()
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "extender",
            "--port",
            str(port),
            "--kubeconfig",
            str(kubeconfig),
            "--log-level",
            "warning",
            *args,
        ],
        cwd=Path(__file__).resolve().parents[1],
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    process.kill()
    raise SystemExit("extender did not become ready")


def add_extender_args(parser: argparse.ArgumentParser) -> None:
    """``--extender-arg``: flags for loadsched's extender, as ``options.extender_arg``."""
    parser.add_argument(
        "--extender-arg",
        action="append",
        default=[],
        help="a flag for loadsched's extender (repeatable), e.g. --extender-arg=--filter-messages"
        "=per-reason",
    )


def quick_option(doc: str | None) -> bool:
    """The benchmarks' one flag: ``--quick`` for fewer rounds (a smoke run)."""
    return bool(quick_parser(doc).parse_args().quick)


def quick_parser(doc: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    return parser


class AnnotationWriter:
    """Changes the load annotations of one node after another, ``rate`` nodes a second, on
    a steady schedule, through :meth:`FakeNodeAPI.modify` (so every watch sees ``MODIFIED``).
    Values are drawn over 0..0.9, across the default policy's limits."""

    def __init__(self, api: FakeNodeAPI, rules: LoadRules, rate: float, seed: int = 3) -> None:
        self._api = api
        self._rules = rules
        self._rate = rate
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.written = 0
        self.seconds = 0.0

    def _run(self) -> None:
        nodes = self._api.collections["/api/v1/nodes"]
        started = time.monotonic()
        index = 0
        while not self._stop.is_set():
            due = started + self.written / self._rate
            if due > time.monotonic():
                self._stop.wait(due - time.monotonic())
                continue
            node = json.loads(json.dumps(nodes[index % len(nodes)]))
            usage = round(self._rng.uniform(0, 0.9), 3)
            now = datetime.now(UTC)
            node["metadata"]["annotations"].update(
                payloads.load_annotations(self._rules, usage, now)
            )
            self._api.modify(node)
            self.written += 1
            index += 1
        self.seconds = time.monotonic() - started

    @property
    def achieved(self) -> float:
        return self.written / self.seconds if self.seconds else 0.0

    def __enter__(self) -> AnnotationWriter:
        if self._rate > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def server_ms(response: httpx.Response) -> float:
    assert response.status_code == 200, response.text[:200]
    return float(response.headers["server-timing"].split("dur=")[1])


def measure(client: httpx.Client, bodies: list[bytes], rounds: int) -> dict[str, list[float]]:
    """Filter + prioritize ``rounds`` times, cycling through ``bodies``. As kube-scheduler
    does, a names-only prioritize names the nodes that filter passed, in its order (its body
    made once per distinct filter answer, outside the timings)."""
    samples: dict[str, list[float]] = {
        "filter": [],
        "prioritize": [],
        "cycle": [],
        "round trip": [],
    }
    headers = {"Content-Type": "application/json"}
    passed: dict[bytes, bytes] = {}
    for i in range(rounds + 3):
        body = bodies[i % len(bodies)]
        started = time.perf_counter()
        filtered = client.post("/filter", content=body, headers=headers)
        elapsed = time.perf_counter() - started
        asked = passed.get(filtered.content, body)
        if asked is body and b'"NodeNames":[' in filtered.content:
            if len(passed) > 64:
                passed.clear()
            names = filtered.json()["NodeNames"]
            asked = passed[filtered.content] = payloads.encode(payloads.names_args(names))
        started = time.perf_counter()
        scored = client.post("/prioritize", content=asked, headers=headers)
        elapsed = (elapsed + time.perf_counter() - started) * 1000
        f_ms, p_ms = server_ms(filtered), server_ms(scored)
        if i < 3:
            continue  # warm-up
        samples["filter"].append(f_ms)
        samples["prioritize"].append(p_ms)
        samples["cycle"].append(f_ms + p_ms)
        samples["round trip"].append(elapsed)
    return samples


def time_call(fn: Callable[[], object], repeat: int) -> float:
    best = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best.append(time.perf_counter() - started)
    return statistics.median(best) * 1000


def slim_decode(body: bytes) -> None:
    args = ARGS_DECODER.decode(body)
    for raw in args.Nodes.items if args.Nodes and args.Nodes.items else ():
        NODE_DECODER.decode(raw)


def measure_decisions(nodes: list[dict[str, object]], rounds: int) -> None:
    """The decision alone, in this process (no HTTP, no other task): names-only filter and
    prioritize at every node, each call's body decoded first and its answer encoded, with
    crane's 0..10 and with ``normalize: minMax`` side by side."""
    names = [str(x["metadata"]["name"]) for x in nodes]  # type: ignore[index]
    # twice as many sets as the extender keeps answers for, taken in turn: every answer computed
    bodies = [payloads.encode(payloads.names_args(names[:i] + names[i + 1 :])) for i in range(64)]
    decoded = [NODE_DECODER.decode(json.dumps(x)) for x in nodes]
    policy = default_policy()
    print()
    print(
        f"names-only decision in-process at {len(nodes)} nodes, a node set not asked about lately "
        f"every call, so no answer is kept (decode + decide + encode, ms, {rounds} calls; filter "
        f"includes preparing the prioritize answer, which the served extender does after "
        f"writing the filter answer)"
    )
    for normalize in ("none", "minMax"):
        spec = policy.spec.model_copy(update={"scoring": ScoringPolicy(normalize=normalize)})
        rules = LoadRules.from_policy(policy.model_copy(update={"spec": spec}))
        cache = NodeLoadCache(rules)
        cache.replace(decoded)
        decide = LoadAwareExtender(
            rules=rules,
            clock=lambda: datetime.now(UTC),
            metrics=ExtenderMetrics(),
            node_cache=cache,
        )
        cells = []
        for verb in ("filter", "prioritize"):
            samples = []
            for i in range(rounds + 3):
                started = time.perf_counter()
                args = ARGS_DECODER.decode(bodies[i % len(bodies)])
                assert args.Pod is not None
                ENCODER.encode(getattr(decide, verb)(args.Pod, args))
                if i >= 3:
                    samples.append((time.perf_counter() - started) * 1000)
            cells.append(
                f"{verb} p50/p99 {percentile(samples, 50):.3f}/{percentile(samples, 99):.3f}"
            )
        print(f"  normalize {normalize:<7} " + "  ".join(cells))


def churn_rates(text: str) -> list[float]:
    try:
        rates = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--churn: not a list of rates: {text!r}") from None
    if any(r <= 0 for r in rates):
        raise argparse.ArgumentTypeError(f"--churn: rates must be above 0: {text!r}")
    return rates


class ChurnSource(Protocol):
    """Where the churn table's nodes live and how they change: the fake API server or a
    sandbox's real one with kwok as every node's kubelet."""

    def names(self) -> list[str]: ...

    def objects(self) -> list[dict[str, Any]]:
        """Every node as the API server holds it now."""
        ...

    def writer(self, rate: float) -> Writer: ...


class Writer(Protocol):
    written: int
    seconds: float

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...


class FakeSource:
    def __init__(self, api: FakeNodeAPI, rules: LoadRules) -> None:
        self._api = api
        self._rules = rules

    def names(self) -> list[str]:
        return [x["metadata"]["name"] for x in self._api.collections["/api/v1/nodes"]]

    def objects(self) -> list[dict[str, Any]]:
        return self._api.collections["/api/v1/nodes"]

    def writer(self, rate: float) -> Writer:
        return AnnotationWriter(self._api, self._rules, rate)


def measure_churn(
    client: httpx.Client,
    source: ChurnSource,
    rules: LoadRules,
    rates: list[float],
    rounds: int,
    failures: list[str],
    where: str,
) -> None:
    """Names-only at every node of ``source``: no churn, then each rate, side by side. The
    conditions take turns in blocks of requests, so that the load of the machine's other
    work falls on each alike."""
    names = source.names()
    production = len(names) / ANNOTATOR_PERIOD  # crane's annotator: every node once a period
    refused_before = refusals(source.objects(), rules)
    bodies = {
        "names-only": [payloads.encode(payloads.names_args(names))],
        "names-miss": [
            payloads.encode(payloads.names_args(names[:i] + names[i + 1 :])) for i in range(32)
        ],
    }
    blocks = 8
    conditions = (0.0, *rates)
    samples: dict[tuple[float, str], dict[str, list[float]]] = {
        (r, m): {"filter": [], "prioritize": []} for r in conditions for m in bodies
    }
    written = dict.fromkeys(conditions, 0)
    seconds = dict.fromkeys(conditions, 0.0)
    for _ in range(blocks):
        for rate in conditions:
            with source.writer(rate) as writer:
                if rate:
                    time.sleep(0.5)  # the writer under way
                for mode in bodies:
                    s = measure(client, bodies[mode], max(1, rounds // blocks))
                    for verb in ("filter", "prioritize"):
                        samples[rate, mode][verb] += s[verb]
            written[rate] += writer.written
            seconds[rate] += writer.seconds
    print()
    print(
        f"names-only at {len(names)} nodes under annotation churn through {where}, server ms "
        f"(Server-Timing); production rate = {len(names)} nodes / 180 s; {blocks} blocks per "
        f"condition in turn"
    )
    header = f"{'churn':<20} {'mode':<11} {'filter p50/p99':>15} {'prioritize p50/p99':>19}  {'p99 / no churn':>15}  target"
    print(header)
    print("-" * len(header))
    for rate in conditions:
        label = "none"
        if rate:
            achieved = written[rate] / seconds[rate]
            label = f"{achieved:5.1f} nodes/s ({rate / production:.0f}×)"
        for mode in bodies:
            s = samples[rate, mode]
            p99 = (percentile(s["filter"], 99), percentile(s["prioritize"], 99))
            base = samples[0.0, mode]
            cells = [
                f"{percentile(s[k], 50):6.2f}/{percentile(s[k], 99):7.2f}"
                for k in ("filter", "prioritize")
            ]
            ratio = verdict = ""
            if rate:
                ratio = (
                    f"{p99[0] / percentile(base['filter'], 99):4.2f} / "
                    f"{p99[1] / percentile(base['prioritize'], 99):4.2f}"
                )
                worst = max(p99)
                verdict = (
                    f"p99 {CHURN_TARGET.sign} {CHURN_TARGET.bound:g}: "
                    f"{CHURN_TARGET.judge(worst)} ({worst:.2f})"
                )
                FIGURES.append(
                    measured(
                        CHURN_TARGET,
                        worst,
                        name=f"{mode} p99 under churn at {rate / production:.0f}x "
                        f"({len(names)} nodes, {where})",
                    )
                )
                if CHURN_TARGET.counts(worst):
                    failures.append(f"churn {rate:g}/s {mode}: {verdict}")
            print(f"{label:<20} {mode:<11} {cells[0]:>15} {cells[1]:>19}  {ratio:>15}  {verdict}")
    check_answers_follow(client, source, rules, names, refused_before, failures)


def refusals(nodes: list[dict[str, Any]], rules: LoadRules) -> set[str]:
    """The nodes these objects overload now, by the extender's own rules."""
    cache = NodeLoadCache(rules)
    cache.replace([NODE_DECODER.decode(json.dumps(x)) for x in nodes])
    return set(cache.view(datetime.now(UTC)).refusals)


def check_answers_follow(
    client: httpx.Client,
    source: ChurnSource,
    rules: LoadRules,
    names: list[str],
    refused_before: set[str],
    failures: list[str],
) -> None:
    """The extender's filter answer once the churn stops equals the verdicts of the API
    server's final objects (the events were applied, none lost)."""
    deadline = time.monotonic() + 30
    body = payloads.encode(payloads.names_args(names))
    headers = {"Content-Type": "application/json"}
    while True:
        refused = refusals(source.objects(), rules)
        # an answer that passes nodes lists no refusal: the refused are the names left out
        got = set(names).difference(
            client.post("/filter", content=body, headers=headers).json()["NodeNames"]
        )
        if got == refused or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    same = got == refused
    print(
        f"after churn: the extender rejects {len(got)} nodes ({len(got ^ refused_before)} "
        f"changed by the churn), the API server's objects {len(refused)}: "
        f"{'the same nodes' if same else 'DIFFERENT'}"
    )
    if not same:
        failures.append("after churn: the extender's answer differs from the final objects")


class SandboxSource:
    """A sandbox's nodes: the real API server's objects, changed by patches through it."""

    def __init__(self, box: Sandbox, specs: list[NodeSpec]) -> None:
        self._box = box
        self._specs = specs

    def names(self) -> list[str]:
        return [spec.name for spec in self._specs]

    def objects(self) -> list[dict[str, Any]]:
        listed: Any = self._box.core.list_node(_preload_content=False)
        items: list[dict[str, Any]] = json.loads(listed.data)["items"]
        return items

    def writer(self, rate: float) -> Writer:
        # bench.scheduling imports this module: import its writer when it is used
        from bench.scheduling import AnnotationChurn

        return AnnotationChurn(self._box, self._specs, rate)


def churn_through_sandbox(options: argparse.Namespace, rules: LoadRules, rounds: int) -> int:
    """The churn table with the real control plane: kube-apiserver and etcd hold the nodes,
    kwok renews their Leases and reports their status as their kubelet, and the churn's
    patches go through the API server to the extender's watch."""
    from bench.scheduling import nodes

    failures: list[str] = []
    with Sandbox(lease_seconds=options.lease_seconds) as box:
        print(f"creating {options.kwok_nodes} nodes", file=sys.stderr)
        specs = nodes(options.kwok_nodes)
        box.create_nodes(specs, workers=16)
        url = box.start_extender(args=["--log-level", "warning", *options.extender_arg])
        print(
            f"extender under churn through kube-apiserver; cpus={os.cpu_count()}; "
            f"{renewals(len(specs), options.lease_seconds)}; extender flags: "
            f"{' '.join(options.extender_arg) or 'none'}"
        )
        with httpx.Client(base_url=url, timeout=60) as client:
            measure_churn(
                client,
                SandboxSource(box, specs),
                rules,
                options.churn,
                rounds,
                failures,
                "kube-apiserver",
            )
    record("extender-kwok", FIGURES, quick=options.quick)
    return outcome(failures)


def outcome(failures: list[str]) -> int:
    if failures:
        print("\nTARGETS MISSED: " + "; ".join(failures))
        return 1
    print("\nall targets met")
    return 0


def main() -> int:
    parser = quick_parser(__doc__)
    parser.add_argument(
        "--churn",
        type=churn_rates,
        default=[round(PRODUCTION_RATE, 1), round(5 * PRODUCTION_RATE, 1)],
        help="node annotation updates per second to measure under (default: 27.8,138.9)",
    )
    parser.add_argument(
        "--churn-only", action="store_true", help="only the churn table (5,000 nodes)"
    )
    add_extender_args(parser)
    parser.add_argument(
        "--kwok-nodes",
        type=int,
        default=0,
        help="only the churn table, through a sandbox's real API server with this many nodes, "
        "kwok their kubelet renewing their Leases (default 0: the fake API server)",
    )
    add_lease_option(parser)
    options = parser.parse_args()
    if options.kwok_nodes < 0:
        parser.error("--kwok-nodes must be 0 or more")
    quick = bool(options.quick)
    rules = LoadRules.from_policy(default_policy())
    if options.kwok_nodes:
        return churn_through_sandbox(options, rules, 100 if quick else 400)
    now = datetime.now(UTC)
    sizes = (1000, 5000)
    clusters = {n: payloads.cluster(rules, n, now) for n in sizes}
    largest = clusters[max(sizes)]
    failures: list[str] = []
    print(
        f"extender latency, ms (server = Server-Timing; cycle = filter + prioritize); cpus={os.cpu_count()}; "
        f"extender flags: {' '.join(options.extender_arg) or 'none'}"
    )
    header = f"{'mode':<11} {'nodes':>5} {'body':>8}  {'filter p50/p99':>15} {'prioritize p50/p99':>19} {'cycle p50/p99':>15} {'round trip p50/p99':>19}  target"
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp, FakeNodeAPI(largest) as api:
        process, url = start_extender(
            api.kubeconfig(Path(tmp) / "kubeconfig"), tuple(options.extender_arg)
        )
        try:
            with httpx.Client(base_url=url, timeout=60) as client:
                for mode in () if options.churn_only else ("names-only", "names-miss", "full-node"):
                    for n in sizes:
                        nodes = clusters[n]
                        if mode.startswith("names"):
                            names = [x["metadata"]["name"] for x in largest[:n]]
                            variants = [names]
                            if mode == "names-miss":
                                variants = [names[:i] + names[i + 1 :] for i in range(32)]
                            bodies = [payloads.encode(payloads.names_args(v)) for v in variants]
                            rounds = 60 if quick else 400
                        else:
                            bodies = [payloads.encode(payloads.full_args(nodes))]
                            rounds = (8 if quick else 40) if n > 1000 else (20 if quick else 150)
                        body = bodies[0]
                        s = measure(client, bodies, rounds)
                        cells = [
                            f"{percentile(s[k], 50):6.2f}/{percentile(s[k], 99):7.2f}"
                            for k in ("filter", "prioritize", "cycle", "round trip")
                        ]
                        goal = TARGETS.get((mode, n))
                        verdict = ""
                        if goal is not None:
                            worst = max(
                                percentile(s["filter"], 99), percentile(s["prioritize"], 99)
                            )
                            verdict = (
                                f"p99 {goal.sign} {goal.bound:g}: {goal.judge(worst)} ({worst:.2f})"
                            )
                            FIGURES.append(measured(goal, worst))
                            if goal.counts(worst):
                                failures.append(f"{mode} {n}: {verdict}")
                        print(
                            f"{mode:<11} {n:>5} {len(body) / 1e6:6.2f}MB  {cells[0]:>15} {cells[1]:>19} {cells[2]:>15} {cells[3]:>19}  {verdict}"
                        )
                rounds = 100 if quick else 400
                measure_churn(
                    client,
                    FakeSource(api, rules),
                    rules,
                    options.churn,
                    rounds,
                    failures,
                    "the fake API server",
                )
        finally:
            process.terminate()
            process.wait(10)

    measure_decisions(largest, 300 if quick else 2000)
    print()
    print(
        "request decode, same bodies, in-process (median ms): naive full pydantic vs slim msgspec"
    )
    for n in () if options.churn_only else sizes:
        body = payloads.encode(payloads.full_args(clusters[n]))
        repeat = 3 if quick else 7
        naive = time_call(lambda body=body: NaiveArgs.model_validate_json(body), repeat)
        slim = time_call(lambda body=body: slim_decode(body), repeat)
        print(
            f"  {n:>5} nodes ({len(body) / 1e6:5.1f} MB): pydantic {naive:8.1f}  msgspec {slim:7.1f}  ratio {naive / slim:5.1f}x"
        )
        FIGURES.append(
            Figure(f"request decode at {n} nodes, naive pydantic / msgspec", naive / slim, "ratio")
        )
    record("extender", FIGURES, quick=quick)
    return outcome(failures)


if __name__ == "__main__":
    sys.exit(main())

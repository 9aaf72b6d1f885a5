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

    .venv/bin/python bench/extender.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fake_apiserver import FakeNodeAPI  # noqa: E402
from bench.naive_models import ExtenderArgs as NaiveArgs  # noqa: E402
from extender.scheduling.wire import ARGS_DECODER, NODE_DECODER  # noqa: E402
from shared.load_model import LoadRules  # noqa: E402
from shared.policy import default_policy  # noqa: E402
from tests import payloads  # noqa: E402

TARGETS = {("names-only", 5000): 5.0, ("full-node", 1000): 50.0}
"""p99 of server-side filter and prioritize, in ms."""


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


def quick_option(doc: str | None) -> bool:
    """The benchmarks' one flag: ``--quick`` for fewer rounds (a smoke run)."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    return bool(parser.parse_args().quick)


def server_ms(response: httpx.Response) -> float:
    assert response.status_code == 200, response.text[:200]
    return float(response.headers["server-timing"].split("dur=")[1])


def measure(client: httpx.Client, bodies: list[bytes], rounds: int) -> dict[str, list[float]]:
    """Filter + prioritize ``rounds`` times, cycling through ``bodies``."""
    samples: dict[str, list[float]] = {
        "filter": [],
        "prioritize": [],
        "cycle": [],
        "round trip": [],
    }
    headers = {"Content-Type": "application/json"}
    for i in range(rounds + 3):
        body = bodies[i % len(bodies)]
        started = time.perf_counter()
        filtered = client.post("/filter", content=body, headers=headers)
        scored = client.post("/prioritize", content=body, headers=headers)
        elapsed = (time.perf_counter() - started) * 1000
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


def main() -> int:
    quick = quick_option(__doc__)
    rules = LoadRules.from_policy(default_policy())
    now = datetime.now(UTC)
    sizes = (1000, 5000)
    clusters = {n: payloads.cluster(rules, n, now) for n in sizes}
    largest = clusters[max(sizes)]
    failures: list[str] = []
    print(
        f"extender latency, ms (server = Server-Timing; cycle = filter + prioritize); cpus={os.cpu_count()}"
    )
    header = f"{'mode':<11} {'nodes':>5} {'body':>8}  {'filter p50/p99':>15} {'prioritize p50/p99':>19} {'cycle p50/p99':>15} {'round trip p50/p99':>19}  target"
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp, FakeNodeAPI(largest) as api:
        process, url = start_extender(api.kubeconfig(Path(tmp) / "kubeconfig"))
        try:
            with httpx.Client(base_url=url, timeout=60) as client:
                for mode in ("names-only", "names-miss", "full-node"):
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
                        target = TARGETS.get((mode, n))
                        verdict = ""
                        if target is not None:
                            worst = max(
                                percentile(s["filter"], 99), percentile(s["prioritize"], 99)
                            )
                            ok = worst <= target
                            verdict = f"p99 ≤ {target:g}: {'met' if ok else 'MISSED'} ({worst:.2f})"
                            if not ok:
                                failures.append(f"{mode} {n}: {verdict}")
                        print(
                            f"{mode:<11} {n:>5} {len(body) / 1e6:6.2f}MB  {cells[0]:>15} {cells[1]:>19} {cells[2]:>15} {cells[3]:>19}  {verdict}"
                        )
        finally:
            process.terminate()
            process.wait(10)

    print()
    print(
        "request decode, same bodies, in-process (median ms): naive full pydantic vs slim msgspec"
    )
    for n in sizes:
        body = payloads.encode(payloads.full_args(clusters[n]))
        repeat = 3 if quick else 7
        naive = time_call(lambda body=body: NaiveArgs.model_validate_json(body), repeat)
        slim = time_call(lambda body=body: slim_decode(body), repeat)
        print(
            f"  {n:>5} nodes ({len(body) / 1e6:5.1f} MB): pydantic {naive:8.1f}  msgspec {slim:7.1f}  ratio {naive / slim:5.1f}x"
        )
    if failures:
        print("\nTARGETS MISSED: " + "; ".join(failures))
        return 1
    print("\nall targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())

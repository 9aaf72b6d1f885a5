"""A recording proxy between kube-scheduler and the extender: forwards every call unchanged
and keeps the request bodies, so contract tests can use what kube-scheduler really sends;
the scenario that makes a kube-scheduler call every verb in both node-cache modes, and the
fixture folders the bodies are kept in (one per Kubernetes release)."""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from sandbox.cluster import Sandbox
from sandbox.specs import ExtenderSpec, pod_body


class CapturingProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.bodies: dict[str, list[bytes]] = {}
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with proxy._lock:
                    proxy.bodies.setdefault(self.path.strip("/"), []).append(body)
                request = urllib.request.Request(
                    proxy.upstream + self.path,
                    data=body,
                    method="POST",
                    headers={"Content-Type": "application/json"},
                )
                try:
                    with urllib.request.urlopen(request, timeout=10) as response:
                        status, answer = response.status, response.read()
                except OSError:
                    status, answer = 502, b'{"Error":"upstream unreachable"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> CapturingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "kube-scheduler"
"""Captured bodies: the first ones at the top, one folder per release of the version matrix."""
VERBS = ("filter", "prioritize", "preempt")
MODES = ("names", "full")
BODY_NAMES = tuple(f"{verb}-{mode}" for verb in VERBS for mode in MODES)
"""One body per verb and node-cache mode (``nodeCacheCapable`` true: names, false: full)."""


def fixture_dir(version: str) -> Path:
    return FIXTURES / version


def body_mode(verb: str, body: dict[str, Any]) -> str:
    """``names`` when kube-scheduler sent the names-only form of ``verb``, else ``full``."""
    key = "NodeNameToMetaVictims" if verb == "preempt" else "NodeNames"
    return "names" if body.get(key) is not None else "full"


def first_bodies(bodies: dict[str, list[bytes]]) -> dict[str, dict[str, Any]]:
    """The first body recorded of each verb and mode, keyed ``<verb>-<mode>``."""
    captured: dict[str, dict[str, Any]] = {}
    for verb in VERBS:
        for raw in bodies.get(verb, []):
            body = json.loads(raw)
            captured.setdefault(f"{verb}-{body_mode(verb, body)}", body)
    return captured


def write_fixtures(folder: Path, captured: dict[str, dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for key, body in captured.items():
        (folder / f"{key}.json").write_text(json.dumps(body, indent=1) + "\n")


def read_fixtures(folder: Path) -> dict[str, dict[str, Any]]:
    """The bodies kept in ``folder``; a clear error naming the missing files."""
    missing = [name for name in BODY_NAMES if not (folder / f"{name}.json").is_file()]
    if missing:
        raise FileNotFoundError(
            f"{folder}: no captured {', '.join(missing)} (capture them with"
            " LOADSCHED_WRITE_FIXTURES=1 pytest -m e2e tests/e2e/test_version_smoke.py)"
        )
    return {name: json.loads((folder / f"{name}.json").read_text()) for name in BODY_NAMES}


FILLER_CPU, BIG_CPU = "6", "7"
"""Of a node's 8 cores: a filler on every node leaves no room for a big pod but by preempting
it, and still fits beside up to 2 cores that other tests' pods may hold."""


def capture_every_verb(
    sandbox: Sandbox, extender: str, node_names: list[str], *, prefix: str = "capture"
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Two kube-schedulers (names-only and full-node) call ``extender`` through a recording
    proxy: each places a pod (filter, prioritize), then, with a 6-CPU pod on every node, a
    higher-priority 7-CPU pod that fits only once kube-scheduler preempts (preempt).
    The first body of each verb and mode, and where the preempting pods were bound."""
    scheduling = k8s.SchedulingV1Api(sandbox.api)
    names, full = f"{prefix}-names", f"{prefix}-full"
    priority = f"{prefix}-high"
    batches = {kind: f"{prefix}-{kind}" for kind in ("first", "filler", "big")}
    with CapturingProxy(extender) as proxy:
        sandbox.start_scheduler(names, scheduler_name=names, extender=ExtenderSpec(proxy.url))
        sandbox.start_scheduler(
            full, scheduler_name=full, extender=ExtenderSpec(proxy.url, node_cache_capable=False)
        )
        try:
            sandbox.create_pods(
                pod_body(f"{name}-0", scheduler_name=name, labels={"batch": batches["first"]})
                for name in (names, full)
            )
            sandbox.wait_bound(f"batch={batches['first']}", 2)
            sandbox.create_pods(
                pod_body(
                    f"{prefix}-filler-{node}",
                    scheduler_name=names,
                    cpu=FILLER_CPU,
                    labels={"batch": batches["filler"]},
                )
                for node in node_names
            )
            sandbox.wait_bound(f"batch={batches['filler']}", len(node_names))
            sandbox.create_priority_class(priority, 1000, preemption_policy="PreemptLowerPriority")
            # one at a time: a node one scheduler frees is not offered to the other first
            placed: dict[str, str] = {}
            for name in (names, full):
                sandbox.create_pods(
                    [
                        pod_body(
                            f"{name}-big",
                            scheduler_name=name,
                            cpu=BIG_CPU,
                            priority_class=priority,
                            labels={"batch": batches["big"]},
                        )
                    ]
                )
                placed = sandbox.wait_bound(f"batch={batches['big']}", len(placed) + 1, timeout=90)
        finally:
            sandbox.stop_scheduler(names)
            sandbox.stop_scheduler(full)
            for batch in batches.values():
                sandbox.delete_pods(f"batch={batch}")
            with contextlib.suppress(k8s.ApiException):
                scheduling.delete_priority_class(priority)
    return first_bodies(proxy.bodies), placed

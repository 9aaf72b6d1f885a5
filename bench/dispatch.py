"""Job dispatch against the real API server (and the real Job controller creating pods):
latency of ``POST /v1/jobs`` (p50, p99) and sustained Jobs/s, for new keys and for duplicate
keys, through TokenReview/SubjectAccessReview authorisation with a real service-account token.

Side by side, in the same run, with 2,000 Jobs of the template already in the cluster: what a
LIST-per-request guard costs (list the template's Jobs and Pending pods, then create), against
loadsched's answer from its watch caches, as a ratio.

Targets on this machine, met together at one load (new keys from 2 clients at once;
duplicates from 8): p99 ≤ 50 ms and ≥ 50 new Jobs/s.

    .venv/bin/python -m bench.dispatch [--quick]
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import yaml
from kubernetes import client as k8s

from bench.extender import percentile, quick_option
from bench.results import measured, record
from bench.targets import target
from extender.dispatch.building import TEMPLATE_LABEL
from sandbox.cluster import Sandbox
from sandbox.specs import NodeSpec

NAMESPACE = "bench"
EXISTING = 2000
P99 = target("dispatch", "p99")
RATE = target("dispatch", "new-jobs-rate")


def timed_posts(
    url: str, headers: dict[str, str], keys: list[str], workers: int, template: str = "bench"
) -> tuple[list[float], float, set[int]]:
    """Milliseconds per request, the wall time of all of them, and the status codes seen."""

    def one(key: str, client: httpx.Client) -> tuple[float, int]:
        started = time.perf_counter()
        response = client.post(
            "/v1/jobs", json={"template": template, "key": key, "data": {"ROW_ID": key}}
        )
        return (time.perf_counter() - started) * 1000, response.status_code

    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        started = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(lambda k: one(k, client), keys))
        wall = time.perf_counter() - started
    return [ms for ms, _ in results], wall, {code for _, code in results}


def naive_guard(api: k8s.ApiClient, key: str) -> float:
    """A LIST-per-request guard: list the template's Jobs (is the key there? how many are
    active?) and its Pending pods, then create the Job."""
    batch, core = k8s.BatchV1Api(api), k8s.CoreV1Api(api)
    started = time.perf_counter()
    jobs = batch.list_namespaced_job(NAMESPACE, label_selector=f"{TEMPLATE_LABEL}=bench").items
    _ = any((j.metadata.annotations or {}).get("loadsched.io/key") == key for j in jobs)
    core.list_namespaced_pod(
        NAMESPACE, label_selector=f"{TEMPLATE_LABEL}=bench", field_selector="status.phase=Pending"
    )
    batch.create_namespaced_job(NAMESPACE, suspended_job(f"naive-{key}"))
    return (time.perf_counter() - started) * 1000


def suspended_job(name: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "labels": {TEMPLATE_LABEL: "bench"}},
        "spec": {
            "suspend": True,
            "template": {
                "metadata": {"labels": {TEMPLATE_LABEL: "bench"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "task", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }


def main() -> int:
    quick = quick_option(__doc__)
    count = 100 if quick else 400
    existing = 200 if quick else EXISTING
    with tempfile.TemporaryDirectory() as tmp, Sandbox() as box:
        box.create_nodes([NodeSpec(f"node-{i}", f"127.0.1.{i + 2}", cpu="64") for i in range(20)])
        box.core.create_namespace({"metadata": {"name": NAMESPACE}})
        templates = Path(tmp) / "templates.yaml"
        templates.write_text(
            yaml.safe_dump(
                {
                    "templates": [
                        {
                            "name": "bench",
                            "namespace": NAMESPACE,
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "10m"}},
                            "allowedKeys": {"names": ["ROW_ID"]},
                        },
                        {  # the same, with an admission record (limits never reached)
                            "name": "recorded",
                            "namespace": NAMESPACE,
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "10m"}},
                            "allowedKeys": {"names": ["ROW_ID"]},
                            "maxActive": 100_000,
                            "maxPending": 100_000,
                            "keyRetentionSeconds": 3600,
                        },
                    ]
                }
            )
        )
        url = box.start_extender(
            name="extender-bench",
            args=["--job-templates", str(templates), "--log-level", "warning"],
        )
        box.core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": "bench"}})
        k8s.RbacAuthorizationV1Api(box.api).create_namespaced_role_binding(
            NAMESPACE,
            {
                "metadata": {"name": "bench-edit"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "edit",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "bench", "namespace": NAMESPACE}],
            },
        )
        token = box.core.create_namespaced_service_account_token(
            "bench", NAMESPACE, {"spec": {"expirationSeconds": 3600}}
        ).status.token
        headers = {"Authorization": f"Bearer {token}"}

        print(f"job dispatch against the real API server; cpus={os.cpu_count()}")
        rows = []
        for label, workers in (
            ("new keys, 1 client", 1),
            ("new keys, 2 clients", 2),
            ("new keys, 8 clients", 8),
        ):
            keys = [f"{label[:3]}-{workers}-{i}" for i in range(count)]
            latencies, wall, codes = timed_posts(url, headers, keys, workers)
            assert codes == {201}, codes
            rows.append((label, latencies, count / wall))
        duplicate_keys = [f"new-1-{i % count}" for i in range(count)]
        latencies, wall, codes = timed_posts(url, headers, duplicate_keys, 8)
        assert codes == {200}, codes
        rows.append(("duplicate keys, 8 clients", latencies, count / wall))
        by_label = {label: (values, rate) for label, values, rate in rows}

        print(f"{'requests':<28} {'p50 ms':>7} {'p99 ms':>7} {'Jobs/s':>8}")
        for label, values, rate in rows:
            print(
                f"{label:<28} {percentile(values, 50):7.1f} {percentile(values, 99):7.1f} {rate:8.1f}"
            )
        # both targets at one operating point: 2 clients at once (8 clients queue behind each
        # other on two cores: more Jobs/s, longer tails, printed above); duplicates from 8
        two, new_rate = by_label["new keys, 2 clients"]
        worst_p99 = max(
            percentile(two, 99), percentile(by_label["duplicate keys, 8 clients"][0], 99)
        )

        # side by side, alternating: new keys from 2 clients without and with the admission
        # record (maxActive, maxPending and keyRetentionSeconds: one ConfigMap write per Job)
        record_rows: dict[str, tuple[list[float], float]] = {
            "bench": ([], 0.0),
            "recorded": ([], 0.0),
        }
        for block in range(4):
            for name in record_rows:
                keys = [f"rec-{block}-{i}" for i in range(count // 4)]
                latencies, wall, codes = timed_posts(url, headers, keys, 2, template=name)
                assert codes == {201}, codes
                previous, total = record_rows[name]
                record_rows[name] = (previous + latencies, total + wall)
        plain_rate = count / record_rows["bench"][1]
        recorded_rate = count / record_rows["recorded"][1]
        print(
            f"\nnew keys from 2 clients, without / with the admission record: "
            f"p50 {percentile(record_rows['bench'][0], 50):.1f} / "
            f"{percentile(record_rows['recorded'][0], 50):.1f} ms, "
            f"p99 {percentile(record_rows['bench'][0], 99):.1f} / "
            f"{percentile(record_rows['recorded'][0], 99):.1f} ms, "
            f"{plain_rate:.1f} / {recorded_rate:.1f} Jobs/s: "
            f"ratio {recorded_rate / plain_rate:.2f}x"
        )

        # 2,000 Jobs of the template in the cluster (suspended: no pods), then the comparison
        batch = k8s.BatchV1Api(box.api)
        with ThreadPoolExecutor(16) as pool:
            list(
                pool.map(
                    lambda i: batch.create_namespaced_job(NAMESPACE, suspended_job(f"old-{i}")),
                    range(existing),
                )
            )
        time.sleep(2)  # the extender's Job watch catches up
        rounds = 20 if quick else 60
        naive = [naive_guard(box.api, f"n{i}") for i in range(rounds)]
        ours, _, codes = timed_posts(url, headers, [f"cached-{i}" for i in range(rounds)], 1)
        assert codes == {201}, codes
        ratio = statistics.median(naive) / statistics.median(ours)
        print(
            f"\nwith {existing} Jobs of the template in the cluster, median ms per dispatch:"
            f" LIST-per-request guard {statistics.median(naive):.1f},"
            f" loadsched (watch caches) {statistics.median(ours):.1f}: ratio {ratio:.1f}x"
        )
    record("dispatch", [measured(P99, worst_p99), measured(RATE, new_rate)], quick=quick)
    ok = not P99.counts(worst_p99) and not RATE.counts(new_rate)
    print(
        f"\ntargets, new keys from 2 clients at once (duplicates from 8): p99 {P99.sign} "
        f"{P99.bound:g} ms ({worst_p99:.1f}): {P99.judge(worst_p99)}; {RATE.sign} "
        f"{RATE.bound:g} new Jobs/s ({new_rate:.1f}): {RATE.judge(new_rate)}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Elastic-quota cost at filter: the extender's server-side filter time (Server-Timing) with
1,000 namespaces that have an ElasticQuota and 20,000 bound pods in its caches, beside the same
extender build without quotas, on the same nodes and bodies, measured in one run (requests
alternate between the two processes). Every request is a new pod (its own UID) of a namespace
with a quota, so each one is admitted, assumed and recorded on its ElasticQuota (one merge
patch to the API server, which the other replicas see), the common path; a second row times
pods refused by their max (no write). Targets: ``bench/targets.yaml`` ``quota``.

    .venv/bin/python -m bench.quota [--quick]
"""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.extender import percentile, quick_option, server_ms, start_extender
from bench.fake_apiserver import FakeNodeAPI
from bench.results import Figure, measured, record
from bench.targets import target
from shared.load_model import LoadRules
from shared.policy import default_policy
from shared.quota_ledger import ELASTIC_QUOTAS_PATH
from tests import payloads
from tests.quota_objects import elastic_quota, quota_pod

NAMESPACES = 1000
PODS = 20_000
NODES = 1000
ADMITTED = target("quota", "admitted-of-no-quota")
ADMITTED_P99 = target("quota", "admitted-p99")


def cluster_objects() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    rules = LoadRules.from_policy(default_policy())
    nodes = payloads.cluster(rules, NODES, datetime.now(UTC))
    names = [n["metadata"]["name"] for n in nodes]
    quotas = [
        elastic_quota(f"team-{i:04d}", min={"cpu": 40, "memory": "80Gi"}, max={"cpu": 60})
        for i in range(NAMESPACES)
    ]
    pods = [
        quota_pod(f"p-{i}", f"team-{i % NAMESPACES:04d}", "500m", node=names[i % NODES])
        for i in range(PODS)
    ]
    return nodes, pods, quotas


def filter_body(names: list[str], pod: dict[str, Any]) -> bytes:
    return payloads.encode(payloads.names_args(names, pod))


def main() -> int:
    quick = quick_option(__doc__)
    rounds = 200 if quick else 1500
    nodes, pods, quotas = cluster_objects()
    names = [n["metadata"]["name"] for n in nodes]
    others = {"/api/v1/pods": pods, ELASTIC_QUOTAS_PATH: quotas}
    print(
        f"filter with elastic quotas: {NAMESPACES} quotas, {PODS} pods cached, {NODES} nodes "
        f"(names-only); server-side ms; cpus={os.cpu_count()}"
    )
    samples: dict[str, list[float]] = {"plain": [], "quota": [], "refused": []}
    with tempfile.TemporaryDirectory() as tmp, FakeNodeAPI(nodes, others) as api:
        kubeconfig = api.kubeconfig(Path(tmp) / "kubeconfig")
        plain, plain_url = start_extender(kubeconfig)
        quota, quota_url = start_extender(kubeconfig, ("--elastic-quota",))
        try:
            with (
                httpx.Client(base_url=plain_url, timeout=60) as without,
                httpx.Client(base_url=quota_url, timeout=60) as with_quota,
            ):
                cached = with_quota.get("/metrics").text
                for line in (
                    f"loadsched_extender_quota_cached_pods {float(PODS)}",
                    f'loadsched_extender_elastic_quotas{{state="active"}} {float(NAMESPACES)}',
                ):
                    assert line in cached, f"caches not as expected: {line!r} missing"
                for i in range(rounds + 20):
                    pod = quota_pod(f"new-{i}", f"team-{i % NAMESPACES:04d}", "100m")
                    body = filter_body(names, pod)
                    a = server_ms(without.post("/filter", content=body))
                    b_response = with_quota.post("/filter", content=body)
                    assert len(b_response.json()["NodeNames"]) > 0, b_response.text[:300]
                    b = server_ms(b_response)
                    big = quota_pod(f"big-{i}", f"team-{i % NAMESPACES:04d}", "100")
                    refused = with_quota.post("/filter", content=filter_body(names, big))
                    assert refused.json()["FailedAndUnresolvableNodes"], refused.text[:300]
                    if i < 20:
                        continue  # warm-up
                    samples["plain"].append(a)
                    samples["quota"].append(b)
                    samples["refused"].append(server_ms(refused))
        finally:
            for process in (plain, quota):
                process.terminate()
                process.wait(10)
    base50, base99 = percentile(samples["plain"], 50), percentile(samples["plain"], 99)
    print(f"{'extender':<28} {'p50':>7} {'p99':>7}  ratio p50/p99")
    for label, key in (
        ("without quotas", "plain"),
        ("with quotas, admitted", "quota"),
        ("with quotas, refused (max)", "refused"),
    ):
        p50, p99 = percentile(samples[key], 50), percentile(samples[key], 99)
        print(f"{label:<28} {p50:7.3f} {p99:7.3f}  {p50 / base50:4.2f}x / {p99 / base99:4.2f}x")
    ratio = max(
        percentile(samples["quota"], 50) / base50, percentile(samples["quota"], 99) / base99
    )
    p99 = percentile(samples["quota"], 99)
    print(
        f"\ntargets: admitted p99 {ADMITTED_P99.sign} {ADMITTED_P99.bound:g} ms, its write "
        f"included: {ADMITTED_P99.judge(p99)} ({p99:.2f} ms); admitted p50 and p99 "
        f"{ADMITTED.sign} {ADMITTED.bound:g}× without quotas: {ADMITTED.judge(ratio)} "
        f"({ratio:.2f}×)"
    )
    record(
        "quota",
        [
            measured(ADMITTED_P99, p99),
            measured(ADMITTED, ratio),
            Figure("refused (max) filter p99", percentile(samples["refused"], 99), "ms"),
            Figure("filter p99 without quotas", base99, "ms"),
        ],
        quick=quick,
    )
    return 1 if ADMITTED.counts(ratio) or ADMITTED_P99.counts(p99) else 0


if __name__ == "__main__":
    raise SystemExit(main())

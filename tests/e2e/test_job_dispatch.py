"""Job dispatch end to end: the extender's /v1/jobs against the real API server, the real Job
controller (and its TTL controller) creating and removing pods, a real kube-scheduler binding
them, and kwok running them: each template's labels say when its pods start, how long they run
and how they exit (``sandbox/kwok.py``). No test writes a pod's status."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import yaml
from kubernetes import client as k8s

from sandbox import kwok
from sandbox.cluster import Sandbox
from sandbox.postgres import Postgres
from sandbox.processes import wait_for
from tests.e2e.objects import meta_of, name_of, sent_as, spec_of, status_of

pytestmark = pytest.mark.e2e

NAMESPACE = "dispatch"
AUTH: dict[str, str] = {}
"""The Authorization header of the service account allowed to dispatch (set by the fixture)."""


def service_account_token(sandbox: Sandbox, name: str) -> str:
    sandbox.core.create_namespaced_service_account(
        NAMESPACE, sent_as(k8s.V1ServiceAccount, {"metadata": {"name": name}})
    )
    request = sandbox.core.create_namespaced_service_account_token(
        name,
        NAMESPACE,
        sent_as(k8s.AuthenticationV1TokenRequest, {"spec": {"expirationSeconds": 3600}}),
    )
    return str(status_of(request).token)


def grant_dispatch(sandbox: Sandbox, account: str) -> None:
    """What the cluster's RBAC must allow a dispatcher: batch jobs and cronjobs."""
    rbac = k8s.RbacAuthorizationV1Api(sandbox.api)
    rbac.create_cluster_role(
        sent_as(
            k8s.V1ClusterRole,
            {
                "metadata": {"name": "loadsched-dispatch-test"},
                "rules": [
                    {
                        "apiGroups": ["batch"],
                        "resources": ["jobs", "cronjobs"],
                        "verbs": ["create", "get", "list", "watch", "delete"],
                    }
                ],
            },
        )
    )
    rbac.create_cluster_role_binding(
        sent_as(
            k8s.V1ClusterRoleBinding,
            {
                "metadata": {"name": "loadsched-dispatch-test"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "loadsched-dispatch-test",
                },
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}],
            },
        )
    )


def template(name: str, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "namespace": NAMESPACE,
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", "memory": "16Mi"}},
        "allowedKeys": {"names": ["ROW_ID"]},
        "schedulerName": "loadsched",
        **extra,
    }


@pytest.fixture(scope="module")
def dispatch_url(
    sandbox: Sandbox, schedulers: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    assert "loadsched" in schedulers
    sandbox.core.create_namespace(sent_as(k8s.V1Namespace, {"metadata": {"name": NAMESPACE}}))
    path: Path = tmp_path_factory.mktemp("dispatch") / "templates.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "templates": [
                    # pods wait for the test to start them (an image pull that never ends)
                    template(
                        "work",
                        completions=2,
                        parallelism=2,
                        maxPending=3,
                        maxActive=20,
                        labels=kwok.lifecycle(starts_after="1h", stops_after="3s"),
                    ),
                    template("short", ttlSecondsAfterFinished=1, labels=kwok.lifecycle(runs="3s")),
                    template("flaky", backoffLimit=1, labels=kwok.lifecycle(exit_code=1)),
                    template(
                        "batch",
                        completions=3,
                        parallelism=2,
                        maxActive=2,
                        ttlSecondsAfterFinished=5,
                        labels=kwok.lifecycle(runs="2s"),
                    ),
                    template("polled"),
                ]
            }
        )
    )
    url = sandbox.start_dispatch(name="extender-dispatch", args=["--job-templates", str(path)])
    grant_dispatch(sandbox, "writer")
    AUTH["Authorization"] = f"Bearer {service_account_token(sandbox, 'writer')}"
    yield url
    sandbox.supervisor.stop_named("extender-dispatch")
    k8s.BatchV1Api(sandbox.api).delete_collection_namespaced_job(
        NAMESPACE, propagation_policy="Background"
    )
    sandbox.core.delete_collection_namespaced_pod(NAMESPACE)


def post(url: str, template: str, key: str, **data: str) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/jobs",
        json={"template": template, "key": key, "data": data},
        headers=AUTH,
        timeout=30,
    )


def pods_of(sandbox: Sandbox, job: str) -> list[k8s.V1Pod]:
    return sandbox.core.list_namespaced_pod(
        NAMESPACE, label_selector=f"batch.kubernetes.io/job-name={job}"
    ).items


def start_pods(sandbox: Sandbox, job: str) -> None:
    """Let the Job's waiting pods start (kwok runs them, then they exit after a second)."""
    for pod in pods_of(sandbox, job):
        kwok.start_now(sandbox.core, name_of(pod), NAMESPACE)


def exit_codes(pod: k8s.V1Pod) -> set[int]:
    """The exit codes of a finished pod's containers."""
    containers = status_of(pod).container_statuses
    assert containers is not None, pod
    codes: set[int] = set()
    for container in containers:
        assert container.state is not None and container.state.terminated is not None, container
        codes.add(container.state.terminated.exit_code)
    return codes


def job_state(url: str, name: str) -> dict[str, Any]:
    response = httpx.get(f"{url}/v1/jobs/{NAMESPACE}/{name}", headers=AUTH, timeout=10)
    return response.json() if response.status_code == 200 else {"status": response.status_code}


def test_dispatch_idempotency_and_backpressure(sandbox: Sandbox, dispatch_url: str) -> None:
    first = post(dispatch_url, "work", "row-1", ROW_ID="1")
    assert first.status_code == 201, first.text
    name = first.json()["name"]
    job = k8s.BatchV1Api(sandbox.api).read_namespaced_job(name, NAMESPACE)
    env = spec_of(spec_of(job).template).containers[0].env
    assert env is not None
    assert [(e.name, e.value) for e in env] == [("ROW_ID", "1")]
    assert post(dispatch_url, "work", "row-1", ROW_ID="1").json()["created"] is False

    # 50 concurrent duplicates of a new key: exactly one Job
    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(lambda _: post(dispatch_url, "work", "row-2"), range(50)))
    assert {a.status_code for a in answers} <= {200, 201}
    assert sum(a.json()["created"] for a in answers) == 1
    assert len({a.json()["uid"] for a in answers}) == 1
    jobs = k8s.BatchV1Api(sandbox.api).list_namespaced_job(NAMESPACE).items
    assert len(jobs) == 2

    # 4 Pending pods >= maxPending 3: a new key waits
    wait_for(lambda: len(pods_of(sandbox, name)) == 2, timeout=30, what="row-1's pods")

    def refused() -> bool:
        return post(dispatch_url, "work", "row-3").status_code == 429

    wait_for(refused, timeout=30, what="backpressure on maxPending")
    answer = post(dispatch_url, "work", "row-3")
    assert answer.headers["Retry-After"] == "10"
    assert "Pending pods (maxPending 3)" in answer.json()["detail"]
    # a known key is still answered
    assert post(dispatch_url, "work", "row-2").status_code == 200

    # the pods start running: the new key goes through
    start_pods(sandbox, name)
    wait_for(
        lambda: post(dispatch_url, "work", "row-3").status_code == 201,
        timeout=30,
        what="recovery once pods run",
    )

    # completions are honoured (the pods exit 0), and the state is reported with pod phases
    wait_for(
        lambda: job_state(dispatch_url, name).get("state") == "succeeded",
        timeout=60,
        what="row-1 to complete",
    )
    described = job_state(dispatch_url, name)
    assert described["succeeded"] == 2 and described["completions"] == 2
    assert set(described["pods"].values()) == {"Succeeded"}
    listed = httpx.get(
        f"{dispatch_url}/v1/jobs", params={"state": "succeeded"}, headers=AUTH
    ).json()
    assert [j["name"] for j in listed["items"]] == [name]

    # DELETE with foreground propagation: the Job stays until kwok ends its pods (3 s)
    row2 = answers[0].json()["name"]
    assert (
        httpx.delete(f"{dispatch_url}/v1/jobs/{NAMESPACE}/{row2}", headers=AUTH).status_code == 200
    )
    assert job_state(dispatch_url, row2).get("name") == row2  # waits for its pods
    wait_for(
        lambda: job_state(dispatch_url, row2) == {"status": 404},
        timeout=60,
        what="row-2 to be deleted",
    )


def test_ttl_cleanup_and_backoff_limit(sandbox: Sandbox, dispatch_url: str) -> None:
    short = post(dispatch_url, "short", "s-1").json()["name"]
    wait_for(lambda: pods_of(sandbox, short), timeout=30, what="the short Job's pod")
    events: list[str] = []
    with httpx.stream(
        "GET", f"{dispatch_url}/v1/jobs/{NAMESPACE}/{short}/watch", headers=AUTH, timeout=60
    ) as stream:
        for line in stream.iter_lines():
            if line.startswith("event: "):
                events.append(line.removeprefix("event: "))
                if events[-1] == "deleted":
                    break  # the TTL controller removed the finished Job
    assert events[0] == "job" and events[-1] == "deleted" and len(events) >= 3
    assert job_state(dispatch_url, short) == {"status": 404}

    # backoffLimit 1: its pods exit 1, and the second failure fails the Job
    flaky = post(dispatch_url, "flaky", "f-1").json()["name"]
    wait_for(
        lambda: job_state(dispatch_url, flaky).get("state") == "failed",
        timeout=90,
        what="the flaky Job to fail",
    )
    reasons = [c["reason"] for c in job_state(dispatch_url, flaky)["conditions"]]
    assert "BackoffLimitExceeded" in reasons
    failed = [p for p in pods_of(sandbox, flaky) if status_of(p).phase == "Failed"]
    assert len(failed) == 2
    exits = {code for p in failed for code in exit_codes(p)}
    assert exits == {1}


def test_a_job_runs_to_complete_within_its_limits(sandbox: Sandbox, dispatch_url: str) -> None:
    """completions 3, parallelism 2: the Job controller runs two pods, then the third, and
    the Job completes; maxActive 2 and idempotency hold while it runs."""
    batch = k8s.BatchV1Api(sandbox.api)
    first = post(dispatch_url, "batch", "b-1")
    assert first.status_code == 201, first.text
    name = first.json()["name"]
    second = post(dispatch_url, "batch", "b-2")
    assert second.status_code == 201, second.text
    # two Jobs are active: a third key waits, a known key is answered
    third = post(dispatch_url, "batch", "b-3")
    assert third.status_code == 429 and "(maxActive 2)" in third.json()["detail"]
    running: set[int] = set()
    repeated: list[httpx.Response] = []

    def complete() -> bool:
        pods = pods_of(sandbox, name)
        running.add(sum(status_of(p).phase in ("Pending", "Running") for p in pods))
        repeated.append(post(dispatch_url, "batch", "b-1"))
        return job_state(dispatch_url, name).get("state") == "succeeded"

    wait_for(complete, timeout=90, what="the batch Job to complete", interval=0.2)
    assert repeated and all(
        a.status_code == 200 and a.json()["created"] is False for a in repeated
    ), [a.text for a in repeated]
    job = batch.read_namespaced_job(name, NAMESPACE)
    assert status_of(job).succeeded == 3 and not status_of(job).failed
    assert max(running) == 2  # parallelism
    conditions = status_of(job).conditions
    assert conditions is not None
    kinds = {c.type for c in conditions if c.status == "True"}
    assert "Complete" in kinds
    # its pods ran on kwok's nodes and exited 0
    pods = pods_of(sandbox, name)
    assert len(pods) == 3 and {status_of(p).phase for p in pods} == {"Succeeded"}
    assert all(status_of(p).pod_ip for p in pods)
    # once both are done, the waiting key goes through; the TTL then deletes the Job
    wait_for(
        lambda: post(dispatch_url, "batch", "b-3").status_code == 201,
        timeout=90,
        what="room for a third batch Job",
    )
    wait_for(
        lambda: (
            not batch.list_namespaced_job(NAMESPACE, field_selector=f"metadata.name={name}").items
        ),
        timeout=60,
        what="the TTL to delete the finished Job",
    )


def test_bad_requests(dispatch_url: str) -> None:
    assert post(dispatch_url, "nope", "k").status_code == 404
    bad = post(dispatch_url, "work", "k", PATH="/evil")
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "data", "PATH"]
    typed = httpx.post(
        f"{dispatch_url}/v1/jobs",
        json={"template": "work", "key": "k", "data": {"ROW_ID": 1}},
        headers=AUTH,
    )
    assert typed.status_code == 422 and typed.json()["detail"][0]["loc"][:3] == [
        "body",
        "data",
        "ROW_ID",
    ]


def test_cronjob_fires_and_respects_forbid(sandbox: Sandbox, dispatch_url: str) -> None:
    body = {
        "template": "work",
        "key": "every-minute",
        "schedule": "* * * * *",
        "concurrencyPolicy": "Forbid",
        "data": {"ROW_ID": "cron"},
    }
    created = httpx.post(f"{dispatch_url}/v1/cronjobs", json=body, headers=AUTH, timeout=30)
    assert created.status_code == 201, created.text
    name = created.json()["name"]
    batch = k8s.BatchV1Api(sandbox.api)

    def jobs_of_cron() -> list[k8s.V1Job]:
        return [
            j
            for j in batch.list_namespaced_job(NAMESPACE).items
            if any(
                o.kind == "CronJob" and o.name == name for o in meta_of(j).owner_references or ()
            )
        ]

    wait_for(lambda: len(jobs_of_cron()) == 1, timeout=90, what="the CronJob to fire")
    first = jobs_of_cron()[0]
    env = spec_of(spec_of(first).template).containers[0].env
    assert env is not None and env[0].value == "cron"
    described = httpx.get(f"{dispatch_url}/v1/cronjobs/{NAMESPACE}/{name}", headers=AUTH).json()
    assert described["schedule"] == "* * * * *" and described["concurrencyPolicy"] == "Forbid"
    # its Job's pods never start (template work): the next minutes are skipped, not run beside it
    scheduled = meta_of(first).creation_timestamp
    wait_for(
        lambda: any(
            e.reason == "JobAlreadyActive"
            for e in sandbox.core.list_namespaced_event(
                NAMESPACE, field_selector=f"involvedObject.name={name}"
            ).items
        ),
        timeout=90,
        what="the CronJob controller to skip a run under Forbid",
    )
    assert [name_of(j) for j in jobs_of_cron()] == [name_of(first)]
    assert scheduled is not None
    # the same key updates the CronJob
    updated = httpx.post(
        f"{dispatch_url}/v1/cronjobs", json=body | {"suspend": True}, headers=AUTH, timeout=30
    )
    assert updated.status_code == 200 and updated.json()["uid"] == created.json()["uid"]
    assert batch.read_namespaced_cron_job(name, NAMESPACE).spec.suspend is True
    deleted = httpx.delete(f"{dispatch_url}/v1/cronjobs/{NAMESPACE}/{name}", headers=AUTH)
    assert deleted.status_code == 200


def test_real_service_account_tokens_are_reviewed(sandbox: Sandbox, dispatch_url: str) -> None:
    body = {"template": "work", "key": "auth-1"}
    assert httpx.post(f"{dispatch_url}/v1/jobs", json=body).status_code == 401
    forged = httpx.post(
        f"{dispatch_url}/v1/jobs", json=body, headers={"Authorization": "Bearer forged"}
    )
    assert forged.status_code == 401
    reader = {"Authorization": f"Bearer {service_account_token(sandbox, 'reader')}"}
    denied = httpx.post(f"{dispatch_url}/v1/jobs", json=body, headers=reader)
    assert denied.status_code == 403
    assert denied.json()["detail"].startswith(
        f"user system:serviceaccount:{NAMESPACE}:reader may not create jobs in namespace {NAMESPACE}"
    )
    assert httpx.get(f"{dispatch_url}/v1/jobs", headers=reader).status_code == 403
    allowed = httpx.post(f"{dispatch_url}/v1/jobs", json=body, headers=AUTH)
    assert allowed.status_code in (201, 429), allowed.text  # authorised; may meet backpressure


def run_poller(sandbox: Sandbox, url: str, database_url: str, token_file: Path) -> str:
    """One pass of ``loadsched-dispatch-poll`` as its own process (a restart each time)."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "poller.cli",
            "--once",
            "--database-url",
            database_url,
            "--query",
            'select id, row_id as "ROW_ID" from tasks order by id',
            "--template",
            "polled",
            "--dispatch-url",
            url,
            "--token-file",
            str(token_file),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stderr


def polled_keys(sandbox: Sandbox) -> list[str]:
    jobs = (
        k8s.BatchV1Api(sandbox.api)
        .list_namespaced_job(NAMESPACE, label_selector="loadsched.io/template=polled")
        .items
    )
    return sorted((meta_of(j).annotations or {})["loadsched.io/key"] for j in jobs)


def test_poller_dispatches_each_row_once_across_restarts(
    sandbox: Sandbox, dispatch_url: str, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(AUTH["Authorization"].removeprefix("Bearer "))
    database = tmp_path / "tasks.db"
    with sqlite3.connect(database) as db:
        db.execute("create table tasks (id integer primary key, row_id text)")
        db.executemany("insert into tasks values (?, ?)", [(i, f"sqlite-{i}") for i in (1, 2, 3)])
    first = run_poller(sandbox, dispatch_url, f"sqlite:///{database}", token_file)
    assert "3 rows, 3 Jobs created, 0 already there" in first
    second = run_poller(sandbox, dispatch_url, f"sqlite:///{database}", token_file)
    assert "3 rows, 0 Jobs created, 3 already there" in second
    assert polled_keys(sandbox) == ["1", "2", "3"]

    server = Postgres(sandbox.supervisor)
    url = server.start()
    try:
        with psycopg.connect(url) as db:
            db.execute("create table tasks (id integer primary key, row_id text)")
            for i in (101, 102):
                db.execute("insert into tasks values (%s, %s)", (i, f"pg-{i}"))
        assert "2 rows, 2 Jobs created" in run_poller(sandbox, dispatch_url, url, token_file)
        with psycopg.connect(url) as db:  # a new row arrives between passes
            db.execute("insert into tasks values (103, 'pg-103')")
        again = run_poller(sandbox, dispatch_url, url, token_file)
        assert "3 rows, 1 Jobs created, 2 already there" in again
        with psycopg.connect(url) as db:  # the poller wrote nothing
            count = db.execute("select count(*) from tasks").fetchone()
            assert count is not None and count[0] == 3
    finally:
        server.stop()
    assert polled_keys(sandbox) == ["1", "101", "102", "103", "2", "3"]

"""Job dispatch served by two replicas at once (two processes, each with its own watches,
against the same API server): ``maxActive`` and ``maxPending`` hold across them, and a key
whose Job the TTL controller deleted is not dispatched again. kwok runs the pods: the templates'
labels say how (``sandbox/kwok.py``)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import yaml
from kubernetes import client as k8s

from sandbox import kwok
from sandbox.cluster import Sandbox
from sandbox.processes import wait_for
from tests.e2e.objects import meta_of, name_of, sent_as, status_of

pytestmark = pytest.mark.e2e

NAMESPACE = "replicas"
TEMPLATE_LABEL = "loadsched.io/template"


def template(name: str, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "namespace": NAMESPACE,
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}},
        "allowedKeys": {"names": ["ROW_ID"]},
        **extra,
    }


ARGS: list[str] = []
"""The dispatch processes' arguments (set by the fixture)."""


@pytest.fixture(scope="module")
def replicas(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    sandbox.core.create_namespace(sent_as(k8s.V1Namespace, {"metadata": {"name": NAMESPACE}}))
    path: Path = tmp_path_factory.mktemp("replicas") / "templates.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "templates": [
                    # its Jobs stay active: their pods run for an hour
                    template("capped", maxActive=10, labels=kwok.lifecycle(runs="1h")),
                    # its pods stay Pending: they start an hour after binding
                    template("queued", maxPending=10, labels=kwok.lifecycle(starts_after="1h")),
                    # its pod runs a second and succeeds
                    template("kept", ttlSecondsAfterFinished=1, keyRetentionSeconds=600),
                ]
            }
        )
    )
    ARGS[:] = ["--job-templates", str(path), "--dispatch-auth", "none"]
    names = ["dispatch-a", "dispatch-b"]
    urls = [sandbox.start_dispatch(name=name, args=ARGS) for name in names]
    yield urls
    for name in names:
        sandbox.supervisor.stop_named(name)


def post(url: str, template: str, key: str) -> httpx.Response:
    body = {"template": template, "key": key, "data": {"ROW_ID": key}}
    return httpx.post(f"{url}/v1/jobs", json=body, timeout=60)


def jobs_of(sandbox: Sandbox, template: str) -> list[k8s.V1Job]:
    batch = k8s.BatchV1Api(sandbox.api)
    selector = f"{TEMPLATE_LABEL}={template}"
    return list(batch.list_namespaced_job(NAMESPACE, label_selector=selector).items)


def pending_pods(sandbox: Sandbox, template: str) -> int:
    pods = sandbox.core.list_namespaced_pod(
        NAMESPACE, label_selector=f"{TEMPLATE_LABEL}={template}"
    ).items
    return sum(1 for p in pods if status_of(p).phase == "Pending")


def active(job: k8s.V1Job) -> bool:
    return not any(
        c.status == "True" and c.type in ("Complete", "Failed")
        for c in status_of(job).conditions or ()
    )


def burst_while_watching(
    urls: list[str], template: str, measure: Callable[[], int]
) -> tuple[list[httpx.Response], int]:
    """50 POSTs of distinct keys at once, split across the replicas, while ``measure`` reads
    the API server in a loop; the answers and the most ``measure`` ever read."""
    highest = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            highest[0] = max(highest[0], measure())

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(50) as pool:
            answers = list(
                pool.map(lambda i: post(urls[i % 2], template, f"{template}-{i}"), range(50))
            )
    finally:
        done.set()
        watcher.join()
    return answers, max(highest[0], measure())


def assert_ten_created(answers: list[httpx.Response], limit: str) -> None:
    codes = [a.status_code for a in answers]
    assert codes.count(201) == 10 and codes.count(429) == 40, [a.text for a in answers]
    for refused in (a for a in answers if a.status_code == 429):
        assert refused.headers["Retry-After"] == "10"
        assert limit in refused.json()["detail"]


def test_max_active_holds_across_two_replicas(sandbox: Sandbox, replicas: list[str]) -> None:
    answers, most = burst_while_watching(
        replicas, "capped", lambda: sum(active(j) for j in jobs_of(sandbox, "capped"))
    )
    assert_ten_created(answers, "(maxActive 10)")
    assert most <= 10
    created = {a.json()["name"] for a in answers if a.status_code == 201}
    assert {name_of(j) for j in jobs_of(sandbox, "capped")} == created
    # a key already dispatched is answered by either replica, whatever the pressure
    key = next(f"capped-{i}" for i, a in enumerate(answers) if a.status_code == 201)
    for url in replicas:
        again = post(url, "capped", key)
        assert again.status_code == 200 and again.json()["created"] is False
    assert len(jobs_of(sandbox, "capped")) == 10


def test_max_pending_holds_across_two_replicas(sandbox: Sandbox, replicas: list[str]) -> None:
    answers, most = burst_while_watching(
        replicas, "queued", lambda: pending_pods(sandbox, "queued")
    )
    assert_ten_created(answers, "(maxPending 10)")
    wait_for(lambda: pending_pods(sandbox, "queued") == 10, timeout=60, what="the 10 Jobs' pods")
    assert most <= 10
    assert len(jobs_of(sandbox, "queued")) == 10


def run_poller(url: str, database: Path) -> str:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "poller.cli",
            "--once",
            "--database-url",
            f"sqlite:///{database}",
            "--query",
            'select id, row_id as "ROW_ID" from tasks order by id',
            "--template",
            "kept",
            "--dispatch-url",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_a_key_is_not_dispatched_again_after_the_ttl_deleted_its_job(
    sandbox: Sandbox, replicas: list[str], tmp_path: Path
) -> None:
    database = tmp_path / "tasks.db"
    with sqlite3.connect(database) as db:
        db.execute("create table tasks (id integer primary key, row_id text)")
        db.execute("insert into tasks values (1, 'one')")
    assert "1 rows, 1 Jobs created" in run_poller(replicas[0], database)
    [job] = jobs_of(sandbox, "kept")
    name, uid = name_of(job), meta_of(job).uid
    # its pod succeeds, and the ttl-after-finished controller deletes the Job a second later
    wait_for(lambda: not jobs_of(sandbox, "kept"), timeout=60, what="the TTL to delete the Job")

    for url in replicas:
        answer = post(url, "kept", "1")
        assert answer.status_code == 200, answer.text
        assert answer.json() == {
            "namespace": NAMESPACE,
            "name": name,
            "uid": uid,
            "created": False,
            "state": "succeeded",
        }
    # the poller's query still matches the row: nothing is created again
    assert "1 rows, 0 Jobs created, 1 already there" in run_poller(replicas[1], database)
    # a replica started after the Job was gone knows only that it is gone
    late = sandbox.start_dispatch(name="dispatch-late", args=ARGS)
    try:
        answer = post(late, "kept", "1")
        assert answer.status_code == 200 and answer.json()["created"] is False, answer.text
        assert answer.json()["state"] in ("succeeded", "deleted")
    finally:
        sandbox.supervisor.stop_named("dispatch-late")
    assert jobs_of(sandbox, "kept") == []

"""``Sandbox.create_priority_class`` waits only for the one refusal that means admission has not
seen the new class yet; any other refusal ends the wait at once, as it was answered."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s

from sandbox import processes
from sandbox.cluster_objects import ClusterObjects

NOT_YET = json.dumps(
    {"message": 'pods "priority-probe-" is forbidden: no PriorityClass with name high was found'}
)


class Core:
    def __init__(self, answers: list[k8s.ApiException | None]) -> None:
        self.answers = answers
        self.probes: list[Any] = []

    def create_namespaced_pod(self, namespace: str, body: Any, dry_run: str) -> None:
        assert dry_run == "All"
        self.probes.append(body)
        answer = self.answers.pop(0)
        if answer is not None:
            raise answer


def refusal(status: int, body: str) -> k8s.ApiException:
    e = k8s.ApiException(status=status, reason="Forbidden")
    e.body = body
    return e


class Objects(ClusterObjects):
    def __init__(self, core: Core) -> None:
        self._core = core
        self._api = None

    @property
    def core(self) -> Any:
        return self._core


@pytest.fixture(autouse=True)
def created(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    bodies: list[Any] = []

    class Scheduling:
        def __init__(self, api: Any) -> None:
            pass

        def create_priority_class(self, body: Any) -> None:
            bodies.append(body)

    monkeypatch.setattr(k8s, "SchedulingV1Api", Scheduling)
    monkeypatch.setattr(ClusterObjects, "api", property(lambda self: None))
    monkeypatch.setattr(processes, "time", Ticking())  # wait_for on a clock of its own
    return bodies


class Ticking:
    """A clock a second later at each reading; sleeping takes no time."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1
        return self.now

    def sleep(self, seconds: float) -> None:
        pass


def test_the_wait_lasts_until_admission_knows_the_class(created: list[Any]) -> None:
    core = Core([refusal(403, NOT_YET), refusal(403, NOT_YET), None])
    Objects(core).create_priority_class("high", 1000, preemption_policy="Never")
    assert len(core.probes) == 3
    assert core.probes[0].spec.priority_class_name == "high"
    assert (created[0].metadata.name, created[0].value) == ("high", 1000)
    assert created[0].preemption_policy == "Never"


def test_a_class_admission_never_sees_times_out_naming_the_refusal() -> None:
    core = Core([refusal(403, NOT_YET)] * 100)
    with pytest.raises(TimeoutError, match="no PriorityClass with name high was found"):
        Objects(core).create_priority_class("high", 1000)


def test_another_refusal_ends_the_wait_at_once() -> None:
    quota = refusal(403, json.dumps({"message": "exceeded quota: pods"}))
    core = Core([quota, None])
    with pytest.raises(k8s.ApiException) as raised:
        Objects(core).create_priority_class("high", 1000)
    assert raised.value is quota and len(core.probes) == 1

"""The kubernetes client's objects as the end-to-end tests use them.

Its models mark every field optional, yet the API server always returns an object's metadata
(with its name), spec and status: ``meta_of``, ``name_of``, ``spec_of`` and ``status_of`` say
so once, and fail the test if it is ever not so. Its create methods are annotated with the
models, yet send a plain JSON body as it is: ``sent_as`` passes a test's manifest through
unchanged (a ``cast``, no conversion).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeVar, cast

from kubernetes import client as k8s

Model = TypeVar("Model")
Part = TypeVar("Part")
Part_co = TypeVar("Part_co", covariant=True)


class Described(Protocol):
    @property
    def metadata(self) -> k8s.V1ObjectMeta | None: ...


class Specified(Protocol[Part_co]):
    @property
    def spec(self) -> Part_co | None: ...


class Observed(Protocol[Part_co]):
    @property
    def status(self) -> Part_co | None: ...


def sent_as(model: type[Model], manifest: Mapping[str, object]) -> Model:
    """``manifest``, sent as it is where the client names ``model`` (it serialises a dict as
    JSON unchanged)."""
    return cast(Model, manifest)


def meta_of(obj: Described) -> k8s.V1ObjectMeta:
    assert obj.metadata is not None, obj
    return obj.metadata


def name_of(obj: Described) -> str:
    name = meta_of(obj).name
    assert name is not None, obj
    return name


def spec_of(obj: Specified[Part]) -> Part:
    assert obj.spec is not None, obj
    return obj.spec


def status_of(obj: Observed[Part]) -> Part:
    assert obj.status is not None, obj
    return obj.status

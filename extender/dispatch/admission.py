"""Admission that holds across replicas: ``maxActive``, ``maxPending`` and finished keys kept in
one ConfigMap per template (``loadsched-dispatch-<template>`` in the template's namespace),
changed only with optimistic concurrency.

Before a new key's Job is created, the replica reads the record (its last copy, else a GET),
prunes it against its own watch caches, counts, and writes the record back with the key added,
under the ``resourceVersion`` it read. A concurrent replica's write makes that a 409: re-read,
re-count, try again. So two replicas can never both take the last place, whatever their
watches have seen; within one replica a lock per template keeps its requests from racing each
other. Refusals are decided on a record read in the same call.

Entries leave ``admitted`` when the watch sees their Job finished or deleted (then, with
``keyRetentionSeconds``, they move to ``finished`` for that long), or ``grace_seconds`` after
admission when no Job ever appeared though this replica was watching (a replica died between
the record and the create, or the create failed): nothing leaks. Counting: active = admitted
entries ∪ the template's active Jobs in the watch; Pending = the template's Pending pods in the
watch + for each admitted entry whose pods are not seen yet, the pods its Job starts with.
Pruning happens on the next write; the record holds hashes of keys, ~40 bytes an admitted
entry and ~70 a finished one, and stays under :data:`MAX_RECORD_BYTES` (the oldest finished
keys are forgotten first; a record full of admitted entries refuses).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import httpx
import msgspec

from extender.dispatch.building import TEMPLATE_LABEL
from extender.dispatch.caches import JobStore, TemplatePodStore
from extender.dispatch.templates import JobTemplate
from shared.annotation_keys import MANAGED_BY_LABEL
from shared.errors import APIConflictError, APINotFoundError, LoadschedError
from shared.kube.creating import create
from shared.kube.fetching import get
from shared.kube.meta import ObjectMeta
from shared.kube.paths import CONFIGMAPS
from shared.kube.replacing import replace
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy

logger = logging.getLogger(__name__)

RECORD_PREFIX = "loadsched-dispatch-"
DATA_KEY = "admission.json"
GRACE_SECONDS = 30
"""How long an admitted key whose Job the watch has not seen still counts (create and watch
latency); after that, a Job never seen was never created."""
ATTEMPTS = 8
"""Writes tried per admission before answering 429 (each 409 re-reads the record)."""
MAX_RECORD_BYTES = 900 * 1024
"""Below the API server's 1 MiB object limit, with room for metadata."""


class Admitted(msgspec.Struct, array_like=True, gc=False):
    at: int
    """When it was admitted (Unix seconds)."""
    pods: int
    """The pods its Job starts with: Pending until the watch sees them."""


class Finished(msgspec.Struct, array_like=True, gc=False):
    at: int
    """When its Job was seen finished or gone (Unix seconds)."""
    state: str
    """``succeeded``, ``failed``, or ``deleted`` (gone without being seen to finish)."""
    uid: str = ""


class Entries(msgspec.Struct, gc=False):
    """The record's content, keyed by key hash (the Job's name is ``<template>-<hash>``)."""

    admitted: dict[str, Admitted] = msgspec.field(default_factory=dict)
    finished: dict[str, Finished] = msgspec.field(default_factory=dict)


_ENCODER = msgspec.json.Encoder()
_ENTRIES = msgspec.json.Decoder(Entries)


class _ConfigMap(msgspec.Struct, gc=False, omit_defaults=True):
    """The admission record as read, and as written (``apiVersion`` and ``kind`` set)."""

    apiVersion: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    data: dict[str, str] | None = None


_CONFIGMAP = msgspec.json.Decoder(_ConfigMap)


@dataclass
class Record:
    entries: Entries
    version: str | None
    """The ConfigMap's resourceVersion; ``None`` while it does not exist."""


@dataclass(frozen=True)
class Ticket:
    """``admitted``: create the Job; ``in-flight``: admitted before, its Job not seen yet
    (create it: the API server lets one create win); ``retained``: the key's Job finished or
    is gone (``state``, ``uid``); ``refused``: ``reason``."""

    outcome: Literal["admitted", "in-flight", "retained", "refused"]
    reason: str = ""
    state: str = ""
    uid: str = ""


Limits = Callable[[int, int], str | None]
"""(active Jobs, Pending pods) → why a new Job must wait, or ``None``."""


def needs_record(template: JobTemplate) -> bool:
    return (
        template.max_active is not None
        or template.max_pending is not None
        or template.key_retention_seconds is not None
    )


def record_name(template: JobTemplate) -> str:
    return f"{RECORD_PREFIX}{template.name}"


def starting_pods(spec: dict[str, Any]) -> int:
    """The pods a Job's controller creates first: parallelism (1 by default), at most
    completions."""
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    return parallelism if completions is None else min(parallelism, int(completions))


def prune(
    entries: Entries,
    template: JobTemplate,
    now: int,
    jobs: JobStore,
    *,
    grace: int,
    since: int | None,
) -> Entries:
    """The record as this replica's watch sees it now (a new object)."""
    retention = template.key_retention_seconds or 0
    finished = {h: f for h, f in entries.finished.items() if now - f.at < retention}
    admitted: dict[str, Admitted] = {}
    for h, entry in entries.admitted.items():
        ref = (template.namespace, f"{template.name}-{h}")
        job = jobs.objects.get(ref)
        if job is not None:
            if job.state == "active":
                admitted[h] = entry
                continue
            ended = (job.state, job.metadata.uid)
        elif ref in jobs.gone:
            state, uid = jobs.gone[ref]
            ended = (state if state != "active" else "deleted", uid)
        elif now - entry.at < grace:
            admitted[h] = entry
            continue
        elif since is not None and entry.at >= since:
            continue  # this replica was watching and no Job came: it was never created
        else:
            ended = ("deleted", "")  # gone before this replica watched (or never created)
        if retention:
            finished[h] = Finished(now, *ended)
    return Entries(admitted, finished)


def counts(
    entries: Entries, template: JobTemplate, jobs: JobStore, pods: TemplatePodStore
) -> tuple[int, int]:
    """(active Jobs, Pending pods) of the template: the record's and the watches' together."""
    ns, prefix = template.namespace, f"{template.name}-"
    active = {prefix + h for h in entries.admitted}
    active.update(
        j.metadata.name
        for j in jobs.objects.values()
        if j.template == template.name and j.metadata.namespace == ns and j.state == "active"
    )
    unseen = sum(
        e.pods for h, e in entries.admitted.items() if not pods.count_of_job(ns, prefix + h)
    )
    return len(active), pods.pending(template.name) + unseen


def encode_within(entries: Entries, max_bytes: int) -> bytes | None:
    """The record's bytes, forgetting the oldest finished keys until it fits; ``None`` when
    the admitted entries alone do not."""
    data = _ENCODER.encode(entries)
    while len(data) > max_bytes and entries.finished:
        oldest = sorted(entries.finished, key=lambda h: entries.finished[h].at)
        for h in oldest[: max(1, len(oldest) // 10)]:
            del entries.finished[h]
        data = _ENCODER.encode(entries)
    return data if len(data) <= max_bytes else None


class AdmissionRecords:
    """Reads and writes the admission records (one per template), keeping the last copy."""

    def __init__(
        self,
        *,
        client: httpx.AsyncClient,
        clock: Callable[[], datetime],
        grace_seconds: int = GRACE_SECONDS,
        attempts: int = ATTEMPTS,
        max_bytes: int = MAX_RECORD_BYTES,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self._client = client
        self._retry = retry
        self._clock = clock
        self._grace = grace_seconds
        self._attempts = attempts
        self._max_bytes = max_bytes
        self._records: dict[str, Record] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._since: int | None = None

    async def reserve(
        self,
        template: JobTemplate,
        name: str,
        pods_at_start: int,
        *,
        jobs: JobStore,
        pods: TemplatePodStore,
        limits: Limits,
    ) -> Ticket:
        h = name.removeprefix(f"{template.name}-")
        async with self._locks.setdefault(template.name, asyncio.Lock()):
            now = self._now()
            if self._since is None and jobs.listed:
                self._since = now
            record = self._records.get(template.name)
            fresh = record is None
            if record is None:
                record = await self._read(template)
            for _ in range(self._attempts):
                entries = prune(
                    record.entries, template, now, jobs, grace=self._grace, since=self._since
                )
                done = entries.finished.get(h)
                if done is not None:
                    if h in record.entries.admitted:  # tell replicas that did not see it end
                        await self._settle(template, record.version, entries)
                    return Ticket("retained", state=done.state, uid=done.uid)
                reason = (
                    None
                    if h in entries.admitted
                    else limits(*counts(entries, template, jobs, pods))
                )
                if not fresh and (reason is not None or h in entries.admitted):
                    record, fresh = await self._read(template), True  # decide on the latest
                    continue
                if h in entries.admitted:
                    return Ticket("in-flight")
                if reason is not None:
                    return Ticket("refused", reason)
                entries.admitted[h] = Admitted(now, pods_at_start)
                data = encode_within(entries, self._max_bytes)
                if data is None:
                    where = f"{template.namespace}/{record_name(template)}"
                    return Ticket("refused", f"admission record {where} is full")
                try:
                    await self._write(template, record.version, entries, data)
                    return Ticket("admitted")
                except APIConflictError:
                    record, fresh = await self._read(template), True
            return Ticket(
                "refused",
                f"admission record {template.namespace}/{record_name(template)} changed "
                f"{self._attempts} times in a row",
            )

    async def release(self, template: JobTemplate, name: str) -> None:
        """Take back an admission whose Job could not be created (best effort: otherwise the
        entry ends ``grace_seconds`` later)."""
        h = name.removeprefix(f"{template.name}-")
        async with self._locks.setdefault(template.name, asyncio.Lock()):
            try:
                for _ in range(3):
                    record = await self._read(template)
                    if h not in record.entries.admitted:
                        return
                    del record.entries.admitted[h]
                    try:
                        data = _ENCODER.encode(record.entries)
                        await self._write(template, record.version, record.entries, data)
                        return
                    except APIConflictError:
                        continue
            except LoadschedError as e:
                logger.warning(
                    "job/%s/%s: admission not taken back: %s", template.namespace, name, e
                )

    async def _settle(self, template: JobTemplate, version: str | None, entries: Entries) -> None:
        """Write what pruning learnt (once; a lost race or an error leaves it to the next
        write)."""
        data = encode_within(entries, self._max_bytes)
        if data is None:
            return
        try:
            await self._write(template, version, entries, data)
        except LoadschedError as e:
            logger.info(
                "configmap/%s/%s: not updated: %s", template.namespace, record_name(template), e
            )

    def _now(self) -> int:
        return int(self._clock().timestamp())

    async def _read(self, template: JobTemplate) -> Record:
        name = record_name(template)
        try:
            content = await get(
                self._client,
                CONFIGMAPS,
                name,
                namespace=template.namespace,
                what=f"configmap/{template.namespace}/{name}: get",
                retry=self._retry,
            )
        except APINotFoundError:
            record = Record(Entries(), None)
        else:
            record = self._decode(template, content)
        self._records[template.name] = record
        return record

    def _decode(self, template: JobTemplate, content: bytes) -> Record:
        configmap = _CONFIGMAP.decode(content)
        text = (configmap.data or {}).get(DATA_KEY, "")
        try:
            entries = _ENTRIES.decode(text) if text else Entries()
        except msgspec.DecodeError as e:
            logger.warning(
                "configmap/%s/%s: unreadable %s, starting it again: %s",
                template.namespace,
                record_name(template),
                DATA_KEY,
                e,
            )
            entries = Entries()
        return Record(entries, configmap.metadata.resourceVersion or "")

    async def _write(
        self, template: JobTemplate, version: str | None, entries: Entries, data: bytes
    ) -> None:
        """Create the ConfigMap (``version`` None) or replace it under ``version``; a 409
        (someone wrote first) raises :class:`APIConflictError`."""
        name, namespace = record_name(template), template.namespace
        body = _ConfigMap(
            apiVersion=CONFIGMAPS.api_version,
            kind="ConfigMap",
            metadata=ObjectMeta(
                name=name,
                namespace=namespace,
                resourceVersion=version,
                labels={MANAGED_BY_LABEL: "loadsched", TEMPLATE_LABEL: template.name},
            ),
            data={DATA_KEY: data.decode()},
        )
        where = f"configmap/{namespace}/{name}"
        if version is None:
            content = await create(
                self._client,
                CONFIGMAPS,
                body,
                namespace=namespace,
                what=f"{where}: create",
                retry=self._retry,
            )
        else:
            content = await replace(
                self._client,
                CONFIGMAPS,
                name,
                body,
                namespace=namespace,
                what=f"{where}: replace",
                retry=self._retry,
            )
        stored = _CONFIGMAP.decode(content).metadata.resourceVersion or ""
        self._records[template.name] = Record(entries, stored)

"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's timings: a 15 s
lease, given up when it could not be renewed for 10 s, tried every 2 s.

Every write is guarded by :attr:`LeaderElector.is_leader`, which turns false as soon as the
lease is lost or its renew deadline passes, so a deposed replica stops writing at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import msgspec

from shared.errors import APIConflictError, APIError, APINotFoundError, APIUnreachableError
from shared.kube import creating, fetching, replacing
from shared.kube.meta import ObjectMeta
from shared.kube.paths import LEASES
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy

logger = logging.getLogger(__name__)

MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True)
class LeaseTimings:
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class _LeaseSpec(msgspec.Struct, omit_defaults=True):
    holderIdentity: str | None = None
    leaseDurationSeconds: int | None = None
    acquireTime: str | None = None
    renewTime: str | None = None
    leaseTransitions: int | None = None


class _Lease(msgspec.Struct, omit_defaults=True):
    metadata: ObjectMeta
    spec: _LeaseSpec = msgspec.field(default_factory=_LeaseSpec)
    apiVersion: str = "coordination.k8s.io/v1"
    kind: str = "Lease"


def _parse(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    for layout in (MICRO, "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(stamp, layout).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


class LeaderElector:
    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        name: str,
        namespace: str,
        identity: str,
        timings: LeaseTimings = LeaseTimings(),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
        on_change: Callable[[bool], None] | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        """``clock``: the wall clock written into the lease (``renewTime``, and read back to
        tell whether another holder's lease expired); ``monotonic``: the clock of the renew
        deadline, which must not jump. Each lease call is tried once with ``retry``'s timeout:
        the election loop, every ``retry_period``, is the retry."""
        self._client = client
        self._retry = retry.once()
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.timings = timings
        self._clock = clock
        self._monotonic = monotonic
        self._on_change = on_change
        self._renewed_at: float | None = None  # monotonic time of the last successful renew
        self._leading = False
        self.leading_changed = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        """True while the lease is ours and was renewed within the renew deadline."""
        if not self._leading or self._renewed_at is None:
            return False
        return self._monotonic() - self._renewed_at < self.timings.renew_deadline

    def _set_leading(self, leading: bool) -> None:
        if leading != self._leading:
            self._leading = leading
            logger.info(
                "lease/%s/%s: %s",
                self.namespace,
                self.name,
                "became leader" if leading else "stopped leading",
            )
            self.leading_changed.set()
            if self._on_change is not None:
                self._on_change(leading)

    async def _get(self) -> _Lease | None:
        try:
            content = await fetching.get(
                self._client,
                LEASES,
                self.name,
                namespace=self.namespace,
                what=f"lease/{self.namespace}/{self.name}: get",
                retry=self._retry,
            )
        except APINotFoundError:
            return None
        return msgspec.json.decode(content, type=_Lease)

    async def _write(self, lease: _Lease, create: bool) -> None:
        body = msgspec.json.encode(lease)
        what = f"lease/{self.namespace}/{self.name}: write"
        if create:
            await creating.create(
                self._client, LEASES, body, namespace=self.namespace, what=what, retry=self._retry
            )
        else:  # the lease's resourceVersion guards the replace
            await replacing.replace(
                self._client,
                LEASES,
                self.name,
                body,
                namespace=self.namespace,
                what=what,
                retry=self._retry,
            )

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True if we hold the lease afterwards."""
        now = self._clock()
        stamp = now.strftime(MICRO)
        current = await self._get()
        duration = int(self.timings.lease_duration)
        if current is None:
            lease = _Lease(
                metadata=ObjectMeta(name=self.name, namespace=self.namespace),
                spec=_LeaseSpec(self.identity, duration, stamp, stamp, 0),
            )
            await self._write(lease, create=True)
            return True
        spec = current.spec
        held_by_other = bool(spec.holderIdentity) and spec.holderIdentity != self.identity
        renewed = _parse(spec.renewTime)
        expires = (
            renewed + timedelta(seconds=spec.leaseDurationSeconds or duration) if renewed else None
        )
        if held_by_other and expires is not None and now < expires:
            return False
        transitions = (spec.leaseTransitions or 0) + (
            1 if spec.holderIdentity != self.identity else 0
        )
        acquire = spec.acquireTime if spec.holderIdentity == self.identity else stamp
        current.spec = _LeaseSpec(self.identity, duration, acquire, stamp, transitions)
        await self._write(current, create=False)  # resourceVersion guards against a race
        return True

    async def run(self) -> None:
        """Acquire, then keep renewing; retries every ``retry_period`` until cancelled."""
        while True:
            await self.step()
            await asyncio.sleep(self.timings.retry_period)

    async def step(self) -> None:
        """One acquire-or-renew attempt and its effect on :attr:`is_leader`."""
        try:
            held = await self.try_acquire_or_renew()
        except (APIConflictError, APINotFoundError):
            held = False  # another replica wrote in between: not ours until proven again
        except (APIError, APIUnreachableError) as e:
            logger.warning(
                "lease/%s/%s: attempt failed (%s); will retry", self.namespace, self.name, e
            )
            self._set_leading(self.is_leader)  # keep leading only until the renew deadline
            return
        if held:
            self._renewed_at = self._monotonic()
        self._set_leading(held)

    async def release(self) -> None:
        """Give the lease up (on SIGTERM) so another replica takes over at once."""
        was_leading = self._leading
        self._set_leading(False)
        if not was_leading:
            return
        try:
            current = await self._get()
            if current is not None and current.spec.holderIdentity == self.identity:
                current.spec.holderIdentity = ""
                current.spec.leaseDurationSeconds = 1
                current.spec.renewTime = self._clock().strftime(MICRO)
                await self._write(current, create=False)
                logger.info("lease/%s/%s: released", self.namespace, self.name)
        except (APIError, APIUnreachableError) as e:
            logger.warning("lease/%s/%s: release failed (%s)", self.namespace, self.name, e)

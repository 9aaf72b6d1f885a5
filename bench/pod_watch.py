"""The benches' own pod watch: pods of the sandbox's ``default`` namespace matching a label
selector, listed then watched (resumed after a disconnect) into a store, in a thread of its
own, while the bench goes on."""

from __future__ import annotations

import asyncio
import threading

from sandbox.cluster import Sandbox
from shared.kube.config import load_endpoint
from shared.kube.watching import Reflector, Store
from shared.pods import POD_DECODER, Pod


def watch_pods(
    box: Sandbox, selector: str, store: Store[Pod], *, name: str, until: threading.Event
) -> tuple[threading.Event, threading.Thread]:
    """Watch into ``store`` until ``until`` is set (or the watch ends); the event set once the
    first list is in, and the watch's thread (started)."""
    listed = threading.Event()
    endpoint = load_endpoint(str(box.kubeconfig))

    async def run() -> None:
        async with endpoint.client() as client:
            reflector = Reflector[Pod](
                client=client,
                path="/api/v1/namespaces/default/pods",
                decode=POD_DECODER.decode,
                store=store,
                name=name,
                label_selector=selector,
            )
            task = asyncio.create_task(reflector.run())
            await reflector.synced.wait()
            listed.set()
            while not until.is_set() and not task.done():
                await asyncio.sleep(0.05)
            task.cancel()

    thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    thread.start()
    return listed, thread

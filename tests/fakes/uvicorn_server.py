"""The extender (full-node mode, no cluster) served by uvicorn on 127.0.0.1, as
``loadsched-extender`` serves it, and a filter body to send it."""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import uvicorn

from extender.app import create_app
from extender.serving import server_config
from extender.settings import ExtenderSettings
from shared.load_model import LoadRules
from shared.policy import default_policy
from tests.payloads import cluster, encode, full_args


@contextmanager
def real_server(**settings: Any) -> Iterator[tuple[str, int]]:
    """The extender (full-node mode, no cluster) served by uvicorn on 127.0.0.1 in a thread."""
    config = ExtenderSettings(host="127.0.0.1", port=0, **settings)
    app = create_app(config)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(server_config(app, config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            time.sleep(0.01)
        else:
            raise AssertionError("the server did not start")
        yield sock.getsockname()
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def filter_body(count: int = 4) -> tuple[bytes, set[str]]:
    """A full-node filter body of ``count`` nodes, and the names the load model passes."""
    rules = LoadRules.from_policy(default_policy())
    nodes = cluster(rules, count, datetime.now(UTC))
    body = encode(full_args(nodes))
    return body, {n["metadata"]["name"] for n in nodes}

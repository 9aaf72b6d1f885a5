"""Bench-only: a minimal API server stand-in on 127.0.0.1 that serves lists (paged) and
watches — nodes, and any other collections given — so the extender's caches sync over real
HTTP. :meth:`FakeNodeAPI.modify` replaces an object and sends it as a ``MODIFIED`` event to
every open watch of its collection (the churn a real cluster's annotator makes); with no
modification a watch stays idle until its timeout."""

from __future__ import annotations

import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse


class FakeNodeAPI:
    def __init__(
        self, nodes: list[dict[str, Any]], others: dict[str, list[dict[str, Any]]] | None = None
    ) -> None:
        self.collections = {"/api/v1/nodes": nodes, **(others or {})}
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._version = 1
        self._positions = {
            path: {item["metadata"]["name"]: i for i, item in enumerate(items)}
            for path, items in self.collections.items()
        }
        self._watchers: dict[str, list[queue.SimpleQueue[bytes | None]]] = {
            path: [] for path in self.collections
        }
        self.events_sent = 0
        """Events written to watches so far (every watcher counts)."""
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                items = api.collections.get(url.path)
                if items is None:
                    self.send_error(404)
                    return
                if query.get("watch"):
                    self._watch(url.path, float(query.get("timeoutSeconds", "300")))
                    return
                start = int(query.get("continue", "0") or 0)
                limit = int(query.get("limit", "0") or 0) or len(items)
                with api._lock:
                    meta: dict[str, Any] = {"resourceVersion": str(api._version)}
                    if start + limit < len(items):
                        meta["continue"] = str(start + limit)
                    page = items[start : start + limit]
                    body = json.dumps({"kind": "List", "metadata": meta, "items": page}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _watch(self, path: str, timeout: float) -> None:
                events: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
                with api._lock:
                    api._watchers[path].append(events)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self.wfile.flush()
                    timer = threading.Timer(timeout, lambda: events.put(None))
                    timer.daemon = True
                    timer.start()
                    while not api.stop.is_set():
                        line = events.get()
                        if line is None:
                            break
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                        self.wfile.flush()
                    timer.cancel()
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass  # the client went away
                finally:
                    with api._lock:
                        api._watchers[path].remove(events)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def modify(self, item: dict[str, Any], path: str = "/api/v1/nodes") -> None:
        """Replace the object of ``item``'s name in the collection at ``path`` with ``item``
        (given a new resourceVersion) and send it as ``MODIFIED`` to every open watch."""
        with self._lock:
            self._version += 1
            item["metadata"]["resourceVersion"] = str(self._version)
            items = self.collections[path]
            items[self._positions[path][item["metadata"]["name"]]] = item
            line = json.dumps({"type": "MODIFIED", "object": item}).encode() + b"\n"
            for watcher in self._watchers[path]:
                watcher.put(line)
                self.events_sent += 1

    def watching(self, path: str = "/api/v1/nodes") -> int:
        """How many watches of ``path`` are open."""
        with self._lock:
            return len(self._watchers[path])

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: bench\n"
            f"clusters: [{{name: bench, cluster: {{server: '{self.url}'}}}}]\n"
            "users: [{name: bench, user: {token: bench}}]\n"
            "contexts: [{name: bench, context: {cluster: bench, user: bench}}]\n"
        )
        return path

    def __enter__(self) -> FakeNodeAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        with self._lock:
            for watchers in self._watchers.values():
                for watcher in watchers:
                    watcher.put(None)
        self.server.shutdown()
        self.server.server_close()

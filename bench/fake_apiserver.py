"""Bench-only: a minimal API server stand-in on 127.0.0.1 that serves lists (paged), watches
and JSON merge patches of namespaced objects — nodes, and any other collections given — so the
extender's caches sync over real HTTP. :meth:`FakeNodeAPI.modify` replaces an object and sends
it as a ``MODIFIED`` event to every open watch of its collection (the churn a real cluster's
annotator makes), as a patch does; with no modification a watch stays idle until its
timeout."""

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
            path: {_key(item): i for i, item in enumerate(items)}
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
            disable_nagle_algorithm = True  # a write and its small answer are not held back

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
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

            def do_PATCH(self) -> None:
                """A JSON merge patch of one namespaced object, as the API server applies it:
                409 when the patch names a resourceVersion the object no longer has."""
                parts = urlparse(self.path).path.split("/")
                if "namespaces" not in parts or len(parts) < parts.index("namespaces") + 4:
                    self.send_error(404)
                    return
                at = parts.index("namespaces")
                path = "/".join(parts[:at] + parts[at + 2 : -1])
                key = (parts[at + 1], parts[-1])
                patch = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                code, answer = api.patch(path, key, patch)
                body = json.dumps(answer).encode()
                self.send_response(code)
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
            items[self._positions[path][_key(item)]] = item
            line = json.dumps({"type": "MODIFIED", "object": item}).encode() + b"\n"
            for watcher in self._watchers[path]:
                watcher.put(line)
                self.events_sent += 1

    def patch(
        self, path: str, key: tuple[str, str], patch: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        """Apply a JSON merge patch to the object ``key`` (namespace, name) of the collection
        at ``path``; (HTTP status, the object or a Status)."""
        with self._lock:
            at = self._positions.get(path, {}).get(key)
            if at is None:
                return 404, _status(404, "NotFound", f"{key[0]}/{key[1]} not found")
            current = self.collections[path][at]
            wanted = (patch.get("metadata") or {}).get("resourceVersion")
            if wanted is not None and wanted != current["metadata"].get("resourceVersion"):
                return 409, _status(409, "Conflict", "the object has been modified")
        item = _merged(json.loads(json.dumps(current)), patch)
        self.modify(item, path)
        return 200, item

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


def _key(item: dict[str, Any]) -> tuple[str, str]:
    meta = item["metadata"]
    return meta.get("namespace", ""), meta["name"]


def _merged(target: Any, patch: Any) -> Any:
    """RFC 7386: ``patch`` merged into ``target`` (null deletes a key)."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for name, value in patch.items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = _merged(target.get(name), value)
    return target


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }

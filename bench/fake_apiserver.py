"""Bench-only: a minimal API server stand-in on 127.0.0.1 that serves lists (paged) and idle
watches — nodes, and any other collections given — so the extender's caches sync over real
HTTP."""

from __future__ import annotations

import json
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
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self.wfile.flush()
                    api.stop.wait(float(query.get("timeoutSeconds", "300")))
                    self.wfile.write(b"0\r\n\r\n")
                    return
                start = int(query.get("continue", "0") or 0)
                limit = int(query.get("limit", "0") or 0) or len(items)
                meta: dict[str, Any] = {"resourceVersion": "1"}
                if start + limit < len(items):
                    meta["continue"] = str(start + limit)
                body = json.dumps(
                    {"kind": "List", "metadata": meta, "items": items[start : start + limit]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

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
        self.server.shutdown()
        self.server.server_close()

"""A free TCP port on 127.0.0.1, and whether a URL answers 200."""

from __future__ import annotations

import socket
import ssl
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False

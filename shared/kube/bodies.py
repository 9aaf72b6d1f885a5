"""Request bodies: JSON from msgspec, or bytes already encoded by the caller."""

from __future__ import annotations

from typing import Any

import msgspec

JSON = {"Content-Type": "application/json"}


def encode(body: Any) -> bytes:
    """``body`` as JSON bytes (bytes pass through unchanged)."""
    if isinstance(body, bytes):
        return body
    return msgspec.json.encode(body)

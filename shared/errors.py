"""The one error tree of loadsched. Third-party exceptions are translated into these
at the module that talks to the third party, and re-raised ``from`` the original."""

from __future__ import annotations


class LoadschedError(Exception):
    """Base of every error loadsched raises on purpose."""


class ConfigError(LoadschedError):
    """A configuration file or setting is invalid. The message names the file and field."""

    def __init__(self, source: str, field: str, message: str) -> None:
        self.source = source
        self.field = field
        self.message = message
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {message}")


class APIError(LoadschedError):
    """The Kubernetes API answered with an error status."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        super().__init__(f"HTTP {status} {reason}: {message}")


class APINotFoundError(APIError):
    """404: the object does not exist (any more)."""


class APIConflictError(APIError):
    """409: a conflicting write, or a resourceVersion that no longer matches."""


class APIGoneError(APIError):
    """410: a watch or list resourceVersion is too old; the caller must re-list."""


class APITransientError(APIError):
    """5xx or 429: worth retrying with backoff."""


class APIUnreachableError(LoadschedError):
    """The API server could not be reached (connect error, timeout, broken stream)."""

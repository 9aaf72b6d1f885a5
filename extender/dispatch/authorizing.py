"""The dispatch API's authentication and authorization: :mod:`extender.common.access`, shared with
the scheduling room's explain endpoint (the rooms import neither each other)."""

from extender.common.access import (
    Action,
    AuthMode,
    Authorizer,
    Caller,
    Forbidden,
    Identity,
    Unauthenticated,
    bearer_token,
    load_static_tokens,
)

__all__ = [
    "Action",
    "AuthMode",
    "Authorizer",
    "Caller",
    "Forbidden",
    "Identity",
    "Unauthenticated",
    "bearer_token",
    "load_static_tokens",
]

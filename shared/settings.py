"""Typed service settings: environment variables ``LOADSCHED_*``, overridden by CLI flags, and
every validation problem reported as a :class:`ConfigError` naming the flag and variable."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from shared.errors import ConfigError

ENV_PREFIX = "LOADSCHED_"
S = TypeVar("S", bound=BaseSettings)


def flag_and_variable(field: str) -> str:
    return f"--{field.replace('_', '-')} / {ENV_PREFIX}{field.upper()}"


def build_settings(cls: type[S], overrides: dict[str, Any]) -> S:
    """``cls`` from the environment plus the non-``None`` ``overrides``."""
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return cls(**given)
    except ValidationError as e:
        detail = e.errors()[0]
        field = str(detail["loc"][0]) if detail["loc"] else ""
        raise ConfigError(
            flag_and_variable(field) if field else "settings", "", detail["msg"]
        ) from e

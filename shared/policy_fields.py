"""The field types the policy's models share: a strict model, a Go duration, a Kubernetes
quantity, a resource."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, WithJsonSchema

from shared.durations import GO_DURATION_PATTERN, format_duration, parse_duration
from shared.quantity import parse_quantity

Resource = Literal["cpu", "memory"]


def _go_duration(value: Any) -> timedelta:
    if isinstance(value, timedelta):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a Go duration string such as 30s, 3m or 1h30m")
    return parse_duration(value)


GoDuration = Annotated[
    timedelta,
    BeforeValidator(_go_duration),
    PlainSerializer(format_duration, when_used="json"),
    WithJsonSchema({"type": "string", "pattern": GO_DURATION_PATTERN}),
]
"""A Go duration (``30s``, ``3m``, ``1h30m``); JSON (and the JSON Schema) spell it so too."""


class Strict(BaseModel):
    """A policy model: unknown fields refused, values frozen."""

    # attribute docstrings become field descriptions in the JSON Schema (make reference)
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def _quantity(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError("must be a quantity such as 250m, 1 or 200Mi")
    try:
        quantity = parse_quantity(value)
    except ValueError as e:
        raise ValueError(f"must be a quantity such as 250m, 1 or 200Mi, got {value!r}") from e
    if quantity < 0:
        raise ValueError("must not be negative")
    return float(quantity)


Quantity = Annotated[
    float,
    BeforeValidator(_quantity),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "number", "minimum": 0}]}),
]
"""A Kubernetes quantity (``250m``, ``1``, ``200Mi``) read as a number (cores, bytes)."""

"""``chart-values.md``: every value of the Helm chart, walked from its ``values.schema.json``,
with the default from ``values.yaml`` and the description from the schema or, where it has
none, from the comment above the key in ``values.yaml``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from reference_pages.markdown import cell, code, page, table

CHART = Path("charts") / "loadsched"
_KEY = re.compile(r"^( *)([A-Za-z0-9_.-]+):(\s.*)?$")
_COMMENT = re.compile(r"^\s*#\s?(.*)$")


def files(root: Path) -> dict[str, str]:
    schema = json.loads((root / CHART / "values.schema.json").read_text())
    text = (root / CHART / "values.yaml").read_text()
    defaults = yaml.safe_load(text)
    comments = dict(commented_keys(text))
    rows = []
    for path, node in values(schema, ""):
        description = node.get("description") or comments.get(path, "")
        rows.append(
            [code(path), type_of(node), default_of(defaults, path, node), cell(description)]
        )
    blocks = [
        "Every value of the chart (`charts/loadsched`), from its `values.schema.json`, which "
        "`helm install` and `helm lint` check (unknown keys and wrong types are refused); "
        "defaults from `values.yaml`. How the values fit together is in "
        "[Install](../install.md). `[]` marks the items of a list.",
        table(["value", "type", "default", "description"], rows),
    ]
    return {"chart-values.md": page("Chart values", *blocks)}


def values(node: dict[str, Any], prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, schema) of every value, each object before what it holds, in the schema's
    order."""
    for name, prop in node.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        yield path, prop
        yield from values(prop, path)
        items = prop.get("items", {})
        if "properties" in items:
            yield from values(items, f"{path}[]")


def type_of(node: dict[str, Any]) -> str:
    if "enum" in node:
        return " \\| ".join(code(value) for value in node["enum"])
    kind = node.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    return " or ".join(str(k) for k in kinds)


def default_of(defaults: Any, path: str, node: dict[str, Any]) -> str:
    if "properties" in node:
        return ""  # an object whose values have rows of their own
    value = defaults
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return ""
        value = value[part]
    return code(value)


def commented_keys(text: str) -> Iterator[tuple[str, str]]:
    """(path, comment) of each key of a block-style YAML text with comment lines right
    above it."""
    stack: list[tuple[int, str]] = []
    comment: list[str] = []
    for line in text.splitlines():
        key = _KEY.match(line)
        remark = _COMMENT.match(line)
        if remark is not None:
            comment.append(remark[1])
            continue
        if key is not None:
            indent = len(key[1])
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, key[2]))
            if comment:
                yield ".".join(name for _, name in stack), " ".join(comment)
        comment = []

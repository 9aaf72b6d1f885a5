"""``policy.md`` and ``policy.schema.json``: the policy file's JSON Schema, generated from the
pydantic models of :mod:`shared.policy` (and the modules of its parts), and a table of every
field walked from it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reference_pages.markdown import cell, code, json_file, page, table
from shared.durations import GO_DURATION_PATTERN
from shared.policy import policy_json_schema

SCHEMA_FILE = "policy.schema.json"
OURS = "loadsched:"
"""How a model's docstring marks a field (and all under it) as loadsched's addition."""


def files() -> dict[str, str]:
    schema = policy_json_schema()
    rows = [
        [code(path), kind, default, origin, cell(description)]
        for path, kind, default, origin, description in fields(schema, schema, "", False)
    ]
    blocks = [
        "The policy file is crane-scheduler's `DynamicSchedulerPolicy`; loadsched reads "
        "crane's files unchanged and adds optional fields of its own. crane's strict "
        "decoder refuses those, so a cluster running both keeps two files "
        "([Configure](../configure.md) explains each field in context).",
        "## JSON Schema for editors",
        f"[`{SCHEMA_FILE}`]({SCHEMA_FILE}) (JSON Schema draft 2020-12) is generated from the "
        "models that validate the file at start-up, so an editor flags an unknown field, a "
        "wrong type or a duration Go would not read while you type. With the YAML language "
        "server (VS Code's Red Hat YAML extension, Neovim, Helix, ...), name it on the "
        "file's first line, by path or by URL:",
        "```yaml\n"
        f"# yaml-language-server: $schema=./docs/reference/{SCHEMA_FILE}\n"
        "apiVersion: scheduler.policy.crane.io/v1alpha1\n"
        "kind: DynamicSchedulerPolicy\n"
        "```",
        'or map it to your policy files in the editor\'s settings (`"yaml.schemas": '
        f'{{"./docs/reference/{SCHEMA_FILE}": "policy*.yaml"}}` in VS Code). Any JSON '
        "Schema validator checks a file in CI the same way. Two checks only loading the "
        "file makes: every metric named by `predicate`, `priority` or `scoring` has a "
        "`syncPolicy` entry, and `timestampZone` is a known time zone.",
        "## Fields",
        "*crane*: the field is crane-scheduler's; *loadsched*: an optional addition crane "
        "refuses. Durations are Go's (`30s`, `3m`, `1h30m`); quantities Kubernetes' (`250m`, "
        "`200Mi`). `[]` marks the items of a list.",
        table(["field", "type", "default", "from", "description"], rows),
    ]
    return {"policy.md": page("Policy file", *blocks), SCHEMA_FILE: json_file(schema)}


def fields(
    schema: dict[str, Any], node: dict[str, Any], prefix: str, ours: bool
) -> Iterator[tuple[str, str, str, str, str]]:
    """(path, type, default, origin, description) of every property under ``node``, depth
    first in the models' order."""
    node = resolved(schema, node)
    required = set(node.get("required", ()))
    either = [name for option in node.get("oneOf", ()) for name in option.get("required", ())]
    for name, prop in node.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        target = resolved(schema, object_of(prop))
        description = prop.get("description") or target.get("description") or ""
        mine = ours or description.startswith(OURS)
        default = "required" if name in required else defaulted(prop)
        if name in either:
            default = "required: " + " or ".join(code(other) for other in either)
        text = description.removeprefix(OURS).strip()
        yield (
            path,
            type_of(schema, prop),
            default,
            "loadsched" if mine else "crane",
            text[:1].upper() + text[1:],
        )
        if "properties" in target:
            inner = f"{path}[]" if prop.get("type") == "array" else path
            yield from fields(schema, target, inner, mine)


def resolved(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    found: dict[str, Any] = schema["$defs"][ref.rsplit("/", 1)[1]]
    return found


def object_of(prop: dict[str, Any]) -> dict[str, Any]:
    """The object schema a property holds: itself, its items, or the non-null of anyOf."""
    if "items" in prop:
        return object_of(prop["items"])
    for option in prop.get("anyOf", ()):
        if option.get("type") != "null":
            return object_of(option)
    return prop


def type_of(schema: dict[str, Any], prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return "object"
    if "enum" in prop:
        return " \\| ".join(code(value) for value in prop["enum"])
    if "const" in prop:
        return code(prop["const"])
    if prop.get("pattern") == GO_DURATION_PATTERN:
        return "duration"
    if "anyOf" in prop:
        kinds = [type_of(schema, option) for option in prop["anyOf"]]
        if kinds == ["string", "number"]:
            return "quantity"
        return " or ".join(kind for kind in kinds if kind != "null") + (
            ", or null" if "null" in kinds else ""
        )
    if prop.get("type") == "array":
        return f"list of {type_of(schema, prop['items'])}"
    return str(prop.get("type", "any"))


def defaulted(prop: dict[str, Any]) -> str:
    if "default" not in prop:
        return ""
    value = prop["default"]
    if isinstance(value, dict):
        return "see its fields" if value else code({})
    return code(value)

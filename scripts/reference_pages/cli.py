"""``cli.md``: every entry point's flags, read from the argparse parsers the entry points
build, with each flag's default and environment variable from the settings it sets."""

from __future__ import annotations

import argparse
import tomllib
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

from annotator.cli import build_parser as annotator_parser
from annotator.settings import AnnotatorSettings
from extender.cli import build_parser as extender_parser
from extender.settings import ExtenderSettings
from kubectl_loadsched import cli as kubectl
from poller.cli import PollSettings
from poller.cli import build_parser as poller_parser
from reference_pages.markdown import cell, code, page, table
from shared.settings import ENV_PREFIX


@dataclass(frozen=True)
class EntryPoint:
    script: str
    """The console script (pyproject.toml's ``[project.scripts]``)."""
    parser: Callable[[], argparse.ArgumentParser]
    settings: type[BaseSettings] | None
    """The settings the flags set (``LOADSCHED_<FLAG>`` each); ``None``: plain defaults."""
    environment: dict[str, str]
    """Flags (by destination) whose default is an environment variable of their own."""


ENTRY_POINTS = (
    EntryPoint("loadsched-extender", extender_parser, ExtenderSettings, {}),
    EntryPoint("loadsched-annotator", annotator_parser, AnnotatorSettings, {}),
    EntryPoint("loadsched-dispatch-poll", poller_parser, PollSettings, {}),
    EntryPoint("kubectl-loadsched", lambda: kubectl.parser(environ={}), None, kubectl.ENVIRONMENT),
)


def files(root: Path) -> dict[str, str]:
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    missing = set(scripts) - {entry.script for entry in ENTRY_POINTS}
    if missing:
        raise SystemExit(f"scripts/reference_pages/cli.py: no parser for {sorted(missing)}")
    sections = [
        "Every flag of every command, from the parsers themselves. For the three services, "
        f"each flag also reads an environment variable, `{ENV_PREFIX}` and the flag's "
        f"setting name in capitals (`--log-level`: `{ENV_PREFIX}LOG_LEVEL`); a flag given "
        "wins over the variable. A `--no-...` flag sets the same setting to false "
        f"(`--no-leader-elect` is `{ENV_PREFIX}LEADER_ELECT=false`). Defaults are the "
        "settings' own.",
    ]
    sections += [section(entry) for entry in ENTRY_POINTS]
    return {"cli.md": page("Command-line flags", *sections)}


def section(entry: EntryPoint) -> str:
    parser = entry.parser()
    blocks = [f"## {parser.prog}", cell(parser.description or ""), flags(parser, entry)]
    for name, sub in subcommands(parser):
        blocks += [f"### {parser.prog} {name}", cell(sub.description or ""), flags(sub, entry)]
    return "\n\n".join(block for block in blocks if block)


def subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # argparse has no public API for its actions
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in sorted(action.choices.items()):
                if not sub.description:
                    sub.description = helps.get(name)
                yield name, sub


def flags(parser: argparse.ArgumentParser, entry: EntryPoint) -> str:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        name = ", ".join(action.option_strings) or action.dest.upper()
        rows.append(
            [
                code(name),
                environment(action, entry),
                default(action, entry),
                choices(action, entry),
                cell(action.help or ""),
            ]
        )
    return table(["flag", "environment", "default", "values", "description"], rows)


def field(action: argparse.Action, entry: EntryPoint) -> Any:
    if entry.settings is None:
        return None
    return entry.settings.model_fields.get(action.dest)


def environment(action: argparse.Action, entry: EntryPoint) -> str:
    if field(action, entry) is not None:
        return code(f"{ENV_PREFIX}{action.dest.upper()}")
    if action.dest in entry.environment:
        return code(entry.environment[action.dest])
    return ""


def default(action: argparse.Action, entry: EntryPoint) -> str:
    setting = field(action, entry)
    if setting is not None:
        if setting.default_factory is not None:
            return "computed at start-up"
        if setting.default is PydanticUndefined:
            return "required"
        value = setting.default
    elif action.option_strings and not isinstance(
        action, argparse._HelpAction | argparse._VersionAction
    ):
        value = action.default
    else:
        return ""
    if value is None:
        return ""
    return code(str(value) if isinstance(value, Path) else value)


def choices(action: argparse.Action, entry: EntryPoint) -> str:
    if action.choices is not None:
        return ", ".join(code(str(choice)) for choice in action.choices)
    setting = field(action, entry)
    if setting is None:
        return ""
    values = literal_values(setting.annotation)
    return ", ".join(code(value) for value in values)


def literal_values(annotation: Any) -> list[Any]:
    """The values of a ``Literal`` (also inside ``X | None``); none for other types."""
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [v for arg in typing.get_args(annotation) for v in literal_values(arg)]

"""The benches' targets, from ``bench/targets.yaml``: one file, read by every bench and by the
results page, so a retired target stops being judged everywhere at once.

    ROUND = target("annotator", "round-of-floor")
    verdict = ROUND.judge(1.07)            # "met", "MISSED" or "retired"
    print(f"round ≤ {ROUND.bound:g}x its floor: {verdict}")
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import yaml

FILE = Path(__file__).with_name("targets.yaml")
Verdict = Literal["met", "MISSED", "retired"]


@dataclass(frozen=True)
class Target:
    bench: str
    name: str
    what: str
    bound: float
    at_most: bool
    """True: the figure must be at most :attr:`bound`; False: at least."""
    unit: str
    retired: str | None = None
    """Why the target is no longer judged; ``None`` while it is."""

    @property
    def key(self) -> str:
        return f"{self.bench}.{self.name}"

    @property
    def sign(self) -> str:
        return "≤" if self.at_most else "≥"

    def met(self, figure: float) -> bool:
        return figure <= self.bound if self.at_most else figure >= self.bound

    def judge(self, figure: float) -> Verdict:
        if self.retired is not None:
            return "retired"
        return "met" if self.met(figure) else "MISSED"

    def counts(self, figure: float) -> bool:
        """Whether ``figure`` fails the bench: missed, and not retired."""
        return self.retired is None and not self.met(figure)


class TargetsError(ValueError):
    pass


def parse(text: str) -> dict[str, Target]:
    """Every target in ``text`` (targets.yaml's format), by ``bench.name``; a clear error naming
    the entry for anything malformed."""
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise TargetsError("targets: expected a mapping of benches")
    found: dict[str, Target] = {}
    for bench, entries in data.items():
        if not isinstance(entries, dict):
            raise TargetsError(f"targets.{bench}: expected a mapping of targets")
        for name, entry in entries.items():
            where = f"targets.{bench}.{name}"
            if not isinstance(entry, dict):
                raise TargetsError(f"{where}: expected a mapping")
            unknown = set(entry) - {"what", "max", "min", "unit", "retired"}
            if unknown:
                raise TargetsError(f"{where}: unknown fields {sorted(unknown)}")
            bounds = [k for k in ("max", "min") if k in entry]
            if len(bounds) != 1:
                raise TargetsError(f"{where}: give exactly one of max and min")
            bound = entry[bounds[0]]
            if not isinstance(bound, int | float) or isinstance(bound, bool):
                raise TargetsError(f"{where}.{bounds[0]}: not a number: {bound!r}")
            for field in ("what", "unit"):
                if not isinstance(entry.get(field), str) or not entry[field]:
                    raise TargetsError(f"{where}.{field}: required text")
            retired = entry.get("retired")
            if retired is not None and not isinstance(retired, str):
                raise TargetsError(f"{where}.retired: text saying why")
            found[f"{bench}.{name}"] = Target(
                str(bench),
                str(name),
                entry["what"],
                float(bound),
                bounds[0] == "max",
                entry["unit"],
                retired,
            )
    return found


@cache
def load() -> dict[str, Target]:
    return parse(FILE.read_text())


def target(bench: str, name: str) -> Target:
    try:
        return load()[f"{bench}.{name}"]
    except KeyError:
        raise KeyError(f"no target {bench}.{name} in {FILE}") from None

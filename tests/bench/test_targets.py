"""bench/targets.yaml: every target parses, is read by a bench, and a retired one is shown but
never judged; a malformed entry is refused naming it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import targets
from bench.targets import TargetsError, parse

ROOT = Path(__file__).resolve().parents[2]


def test_every_target_is_read_by_a_bench() -> None:
    sources = "".join(
        path.read_text() for folder in ("bench", "sandbox") for path in (ROOT / folder).glob("*.py")
    )
    read = set(re.findall(r'target\(\s*"([\w-]+)",\s*"([\w-]+)"\s*\)', sources))
    assert {(t.bench, t.name) for t in targets.load().values()} == read


def test_a_retired_target_is_shown_never_judged() -> None:
    retired = targets.target("scheduling", "loadsched-of-plain")
    assert retired.retired
    assert retired.judge(0.5) == "retired"
    assert not retired.counts(0.5)
    judged = targets.target("scheduling", "loadsched-of-minimal")
    assert (judged.judge(0.94), judged.counts(0.94)) == ("MISSED", True)
    assert (judged.judge(0.95), judged.counts(0.95)) == ("met", False)
    at_most = targets.target("extender", "churn-p99")
    assert (at_most.judge(2.0), at_most.judge(2.01)) == ("met", "MISSED")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("a: {b: {what: x, unit: ms}}", "targets.a.b: give exactly one of max and min"),
        ("a: {b: {what: x, unit: ms, max: 1, min: 0}}", "targets.a.b: give exactly one"),
        ("a: {b: {what: x, unit: ms, max: fast}}", "targets.a.b.max: not a number"),
        ("a: {b: {what: x, max: 1}}", "targets.a.b.unit: required text"),
        ("a: {b: {what: x, unit: ms, max: 1, limit: 2}}", "targets.a.b: unknown fields"),
        ("a: [1]", "targets.a: expected a mapping of targets"),
    ],
)
def test_a_malformed_entry_is_refused_naming_it(text: str, named: str) -> None:
    with pytest.raises(TargetsError, match=re.escape(named)):
        parse(text)

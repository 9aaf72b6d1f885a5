"""The chart's Grafana dashboard (charts/loadsched/files/dashboard.json): every query parses as
PromQL (promtool, from Debian's prometheus package, checks them as recording rules) and names
only metrics the extender and the annotator export (collected from their registries here)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from annotator.metrics import AnnotatorMetrics
from extender.app import create_app
from extender.settings import ExtenderSettings

DASHBOARD = Path(__file__).resolve().parents[1] / "charts/loadsched/files/dashboard.json"
RATE_INTERVAL = "5m"
"""What Grafana's ``$__rate_interval`` stands for when the queries are checked."""

KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool"}
    | {"and", "or", "unless", "inf", "nan"}
)


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, expr) of every query, panels nested in rows included."""
    pending = list(dashboard["panels"])
    while pending:
        panel = pending.pop(0)
        pending += panel.get("panels", [])
        for target in panel.get("targets", []):
            yield f"{panel['title']} / {target['refId']}", target["expr"]


def concrete(expr: str) -> str:
    return expr.replace("$__rate_interval", RATE_INTERVAL)


def promtool_check(exprs: Iterable[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``promtool check rules`` on one recording rule per expression: it parses each."""
    rules = [{"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(exprs)]
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool (Debian's prometheus package) is not on PATH"
    return subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )


def metric_names(expr: str) -> set[str]:
    """The metric names a query selects: identifiers that are not functions, keywords, label
    names (inside ``{...}`` and ``by (...)``), strings or durations."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"(?<![A-Za-z0-9_:])\d+(\.\d+)?(ms|[smhdwy])?", "", text)  # numbers, durations
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group()
        following = text[match.end() :].lstrip()[:1]
        if word.lower() in KEYWORDS or following == "(":
            continue
        names.add(word)
    return names


def exported() -> set[str]:
    """Every series name the extender (both rooms, the API counter) and annotator expose."""
    app = create_app(ExtenderSettings(dispatch_auth="none"))
    registries = [app.state.loadsched.metrics.registry, AnnotatorMetrics().registry]
    names = set()
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    for registry in registries:
        for family in registry.collect():
            names |= {family.name + s for s in suffixes.get(family.type, ("",))}
    return names


def load() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return dashboard


def test_every_query_parses(tmp_path: Path) -> None:
    found = list(queries(load()))
    assert len(found) >= 20
    assert all("$" not in concrete(e) for _, e in found), "a Grafana variable promtool cannot read"
    result = promtool_check((concrete(e) for _, e in found), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(found)} rules found" in result.stdout


@pytest.mark.parametrize(
    "broken",
    [
        "sum by (verb (rate(loadsched_extender_responses_total[5m]))",
        "rate(loadsched_extender_responses_total)",
        "histogram_quantile(0.99, sum by (le) (rate(x[5 minutes])))",
    ],
)
def test_the_check_refuses_what_does_not_parse(tmp_path: Path, broken: str) -> None:
    assert promtool_check([broken], tmp_path).returncode != 0


def test_queries_name_only_exported_metrics() -> None:
    names = exported()
    assert {"loadsched_extender_request_duration_seconds_bucket"} <= names
    assert {"loadsched_annotator_metric_last_success_timestamp_seconds"} <= names
    assert {
        "loadsched_annotator_round_duration_seconds_bucket",
        "loadsched_annotator_quota_used",
        "loadsched_annotator_quota_min",
        "loadsched_annotator_quota_max",
    } <= names  # labelled families without a series yet are collected all the same
    unknown = {
        where: sorted(metric_names(expr) - names)
        for where, expr in queries(load())
        if metric_names(expr) - names
    }
    assert unknown == {}


def test_the_name_collector_sees_metrics_and_nothing_else() -> None:
    expr = (
        'histogram_quantile(0.9, sum by (verb, le) (rate(a_seconds_bucket{code=~"5..", x="y"}'
        "[5m]))) / on (verb) group_left b_total offset 1h and time() - c"
    )
    assert metric_names(expr) == {"a_seconds_bucket", "b_total", "c"}


def test_panels_cover_what_an_operator_asks() -> None:
    """Each area named for the dashboard has a panel whose queries read its metrics."""
    areas = {
        "latency per verb": "loadsched_extender_request_duration_seconds_bucket",
        "nodes rejected": "loadsched_extender_nodes_filtered_total",
        "freshness": "loadsched_annotator_metric_last_success_timestamp_seconds",
        "round time": "loadsched_annotator_round_duration_seconds_bucket",
        "query time": "loadsched_annotator_query_duration_seconds_bucket",
        "writes": "loadsched_annotator_node_patches_total",
        "quota": "loadsched_extender_elastic_quotas",
        "quota use": "loadsched_annotator_quota_used",
        "dispatch": "loadsched_extender_api_requests_total",
        "429": "loadsched_extender_api_requests_total",
        "requeue": "loadsched_extender_requeue_writes_total",
    }
    by_title: dict[str, set[str]] = {}
    for where, expr in queries(load()):
        by_title.setdefault(where.split(" / ")[0].lower(), set()).update(metric_names(expr))
    for area, metric in areas.items():
        assert any(area in title and metric in used for title, used in by_title.items()), area

"""The status page in a real browser: Debian's chromium, headless, loads ``/ui`` from the real
extender (both rooms, elastic quotas, static tokens) on a real control plane, and what it shows
(the heatmap's values and verdicts, the quotas, the templates, the explain box's answer) is
checked against ``/v1/status`` and ``/v1/explain``. A screenshot is saved under out/.

The sandbox here is this module's own, with the admin's credentials (the chart's accounts run
dispatch in a process of its own, and this page shows one process's rooms)."""

from __future__ import annotations

import colorsys
import json
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from sandbox.cluster import Sandbox
from sandbox.processes import wait_for
from sandbox.specs import NodeSpec
from shared.annotations import encode_hot_value, encode_metric
from shared.load_model import LoadRules
from shared.policy import DEFAULT_POLICY_YAML, default_policy
from tests.e2e.objects import sent_as
from tests.e2e.scrape import exported

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "charts" / "loadsched" / "crds" / "elasticquota.yaml"
OUT = ROOT / "out"
TOKEN = "status-page-token"
METRICS = [k for k in LoadRules.from_policy(default_policy()).keys if k != "node_hot_value"]
LOADS = {"node-1": 0.92, "node-2": 0.40, "node-3": 0.15, "node-4": 0.70, "node-5": 0.30}
STALE = "node-5"
HOT = "node-2"
TEMPLATES = {
    "templates": [
        {
            "name": "report",
            "namespace": "default",
            "image": "registry.invalid/report:1",
            "resources": {"requests": {"cpu": "100m"}},
            "maxActive": 1,
            "maxPending": 3,
        }
    ]
}


REBALANCE_STATUS = {
    "roundAt": "2026-11-22T12:05:00Z",
    "dryRun": True,
    "nodes": {"over": 1, "waiting": 1, "held": 0, "stale": 1, "under": 2},
    "overThreshold": [{"node": "node-1", "state": "over", "metrics": []}],
    "plans": [
        {
            "node": "node-1",
            "metric": "cpu_usage_avg_5m",
            "value": 0.92,
            "high": 0.65,
            "overshoot": 2.16,
            "resource": "cpu",
            "moves": [
                {
                    "pod": "team-a/big",
                    "usage": 2.5,
                    "measured": True,
                    "target": "node-3",
                    "valueAfter": 0.4625,
                }
            ],
            "unplaced": [],
        }
    ],
    "lastEvictions": [
        {
            "at": "2026-11-22T12:05:00Z",
            "pod": "team-a/big",
            "node": "node-1",
            "target": "node-3",
            "metric": "cpu_usage_avg_5m",
            "result": "dry-run",
            "detail": "",
        }
    ],
}
"""What the annotator's leader would have published: the page shows it as the API gives it."""


def chromium() -> str:
    found = shutil.which("chromium")
    assert found, "chromium is not installed: run scripts/setup-sandbox.sh"
    return found


def browse(url: str, *args: str, budget: float = 6.0) -> str:
    """Run headless chromium on ``url`` for ``budget`` seconds of the page's virtual time
    (timers run; the clock waits while requests are under way)."""
    result = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            f"--virtual-time-budget={budget * 1000:.0f}",
            *args,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def get(url: str, token: str | None = TOKEN) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def post(url: str, body: dict[str, Any]) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(response.status)


class Cells(HTMLParser):
    """Text of every element with an id, and of each ``data-*`` row's cells."""

    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[str, str] = {}
        self.rows: list[tuple[dict[str, str], list[tuple[dict[str, str], str]]]] = []
        self._stack: list[tuple[str, dict[str, str], list[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._stack.append((tag, {k: v or "" for k, v in attrs}, []))
        if tag == "tr":
            self.rows.append((self._stack[-1][1], []))

    def handle_endtag(self, tag: str) -> None:
        while self._stack:
            name, attrs, text = self._stack.pop()
            joined = "".join(text).strip()
            if self._stack:
                self._stack[-1][2].append("".join(text))
            if "id" in attrs:
                self.by_id[attrs["id"]] = joined
            if name == "td" and self.rows:
                self.rows[-1][1].append((attrs, joined))
            if name == tag:
                return

    def handle_data(self, data: str) -> None:
        if self._stack:
            self._stack[-1][2].append(data)

    def table(self, key: str) -> dict[str, list[tuple[dict[str, str], str]]]:
        """Rows with a ``data-<key>`` attribute, by its value."""
        name = f"data-{key}"
        return {attrs[name]: cells for attrs, cells in self.rows if name in attrs}


def hue(style: str) -> float:
    """The hue (degrees) of the ``background`` in an inline style chromium serialised."""
    match = re.search(r"background(?:-color)?: rgb\((\d+), (\d+), (\d+)\)", style)
    assert match, style
    r, g, b = (int(v) / 255 for v in match.groups())
    return colorsys.rgb_to_hls(r, g, b)[0] * 360


def status_requests(url: str) -> float:
    """``GET /v1/status`` answers the extender has counted."""
    return exported(url, "loadsched_extender_api_requests_total", route="/v1/status", method="GET")


def create_quota(box: Sandbox, namespace: str, spec: dict[str, Any]) -> None:
    k8s.CustomObjectsApi(box.api).create_namespaced_custom_object(
        "scheduling.x-k8s.io",
        "v1alpha1",
        namespace,
        "elasticquotas",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": "quota", "namespace": namespace},
            "spec": spec,
        },
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sandbox, str]]:
    work = tmp_path_factory.mktemp("status-page")
    (work / "templates.yaml").write_text(yaml.safe_dump(TEMPLATES))
    (work / "tokens.csv").write_text(f"{TOKEN},operator,1\n")
    policy = yaml.safe_load(DEFAULT_POLICY_YAML)
    policy["spec"]["estimation"] = {"enabled": True}
    (work / "policy.yaml").write_text(yaml.safe_dump(policy))
    with Sandbox() as box:
        box.create_nodes(NodeSpec(name, f"127.0.0.{i + 1}") for i, name in enumerate(LOADS, 1))
        now = datetime.now(UTC)
        for name, usage in LOADS.items():
            when = now - timedelta(minutes=20) if name == STALE else now
            values: dict[str, str | None] = {m: encode_metric(usage, when) for m in METRICS}
            if name == HOT:
                values["node_hot_value"] = encode_hot_value(3, now)
            box.annotate_node(name, values)
        box.install_crd(CRD)
        for namespace, spec, cpu in (
            ("team-a", {"min": {"cpu": "1"}, "max": {"cpu": "2"}}, "1500m"),
            ("team-b", {"min": {"cpu": "2"}}, None),
        ):
            box.core.create_namespace(sent_as(k8s.V1Namespace, {"metadata": {"name": namespace}}))
            create_quota(box, namespace, spec)
            if cpu:
                box.core.create_namespaced_pod(
                    namespace,
                    sent_as(
                        k8s.V1Pod,
                        {
                            "metadata": {"name": "worker"},
                            "spec": {
                                "nodeName": "node-3",
                                "containers": [
                                    {
                                        "name": "c",
                                        "image": "registry.invalid/w:1",
                                        "resources": {"requests": {"cpu": cpu}},
                                    }
                                ],
                            },
                        },
                    ),
                )
        box.core.create_namespaced_config_map(
            "default",
            sent_as(
                k8s.V1ConfigMap,
                {
                    "metadata": {"name": "loadsched-rebalance"},
                    "data": {"status.json": json.dumps(REBALANCE_STATUS)},
                },
            ),
        )
        url = box.start_extender(
            name="extender-status",
            args=[
                "--elastic-quota",
                "--policy",
                str(work / "policy.yaml"),
                "--job-templates",
                str(work / "templates.yaml"),
                "--dispatch-auth",
                "static",
                "--dispatch-tokens-file",
                str(work / "tokens.csv"),
            ],
        )
        assert post(f"{url}/v1/jobs", {"template": "report", "key": "daily-1"}) == 201
        # a pod the extender sees bound after the samples: estimated on node-3
        box.core.create_namespaced_pod(
            "default",
            sent_as(
                k8s.V1Pod,
                {
                    "metadata": {"name": "just-placed"},
                    "spec": {
                        "nodeName": "node-3",
                        "containers": [
                            {
                                "name": "c",
                                "image": "registry.invalid/w:1",
                                "resources": {"requests": {"cpu": "2"}},
                            }
                        ],
                    },
                },
            ),
        )

        def settled() -> bool:
            _, status = get(f"{url}/v1/status")
            (template,) = status["templates"]["items"]
            quota_seen = any(q["namespace"] == "team-a" for q in status["quotas"]["items"])
            estimates = [
                m["estimated"] for n in status["nodes"]["items"] for m in n["metrics"].values()
            ]
            return bool(template["pending"] == 1 and quota_seen and max(estimates) > 0)

        wait_for(settled, timeout=60, what="the Job's pod and the quotas in /v1/status")
        yield box, url


def test_the_page_shows_what_the_api_says(cluster: tuple[Sandbox, str]) -> None:
    _, url = cluster
    code, _ = get(f"{url}/v1/status", token=None)
    assert code == 401
    page = f"{url}/ui#token={TOKEN}&explain=team-a/worker"
    dom = Cells()
    dom.feed(browse(page, "--dump-dom"))
    _, status = get(f"{url}/v1/status")
    explain_code, explained = get(f"{url}/v1/explain/team-a/worker")

    nodes = status["nodes"]
    assert dom.by_id["state"].startswith("ready")
    assert dom.by_id["count-total"] == str(nodes["total"]) == str(len(LOADS))
    assert dom.by_id["count-rejected"] == str(nodes["rejected"]) == "2"  # 0.92 and 0.70
    assert dom.by_id["count-stale"] == str(nodes["stale"]) == "1"
    rows = dom.table("node")
    assert list(rows) == [n["name"] for n in nodes["items"]]  # worst first, as the API
    estimated = 0
    for node in nodes["items"]:
        cells = rows[node["name"]]
        verdict, score, hot = cells[1][1], cells[2][1], cells[3][1]
        assert verdict == ("passes" if node["passes"] else "rejected")
        assert score == str(node["extenderScore"])
        assert hot == (f"{node['hot']:g}" if node["hot"] else "")
        shown = {
            attrs["data-metric"]: (attrs, text) for attrs, text in cells if "data-metric" in attrs
        }
        assert set(shown) == set(node["metrics"])
        for metric, cell in node["metrics"].items():
            attrs, text = shown[metric]
            assert float(attrs["data-value"]) == cell["value"] == LOADS[node["name"]]
            assert text.startswith(f"{cell['value'] * 100:.1f}%")
            assert ("stale" in attrs["class"]) == (cell["state"] != "fresh")
            assert ("decided" in attrs["class"]) == cell["decided"]
            if cell["state"] == "fresh":  # green at 0 of the limit, red from 100 %
                expected = 0.0 if cell["usage"] > 1 else 130 * (1 - max(0.0, cell["usage"]))
                assert abs(hue(attrs.get("style", "")) - expected) < 2, (metric, cell, attrs)
                shown_estimate = re.search(r"\+(\d+\.\d)%$", text)
                assert bool(shown_estimate) == (cell["estimated"] > 0), (text, cell)
                if shown_estimate:
                    assert abs(float(shown_estimate[1]) - cell["estimated"] * 100) <= 0.051
                    estimated += 1
        if not node["passes"]:
            assert cells[-1][1] == node["rejection"]
    assert estimated > 0  # node-3's just-placed pod, bound after the samples
    assert rows[STALE][4][1].endswith("stale")
    assert rows[HOT][3][1] == "3"

    quotas = {
        (a["data-namespace"], a["data-resource"]): c for a, c in dom.rows if "data-namespace" in a
    }
    for quota in status["quotas"]["items"]:
        for resource, r in quota["resources"].items():
            texts = [text for _, text in quotas[(quota["namespace"], resource)]]
            assert texts[2:] == [r["used"], r["min"], r["max"] or "∞", r["borrowed"], r["lent"]]
    team_a = next(q for q in status["quotas"]["items"] if q["namespace"] == "team-a")
    assert team_a["borrower"] and team_a["resources"]["cpu"]["borrowed"] == "500m"

    (template,) = status["templates"]["items"]
    texts = [text for _, text in dom.table("template")["report"]]
    assert texts[2:4] == ["1 / 1", f"{template['pending']} / 3"]
    assert texts[4] == f"429: {template['refusing']}"
    assert "maxActive 1" in template["refusing"]

    # the rebalancer's published round, as /v1/status gives it
    rebalance = status["rebalance"]
    assert rebalance == {"published": True, **REBALANCE_STATUS}
    assert dom.by_id["rebalance-note"].startswith("DRY RUN: the plan is what would be evicted")
    move = [text for _, text in dom.table("move")["team-a/big"]]
    assert move == [
        "team-a/big",
        "node-1",
        "node-3",
        "2.50",
        "cpu_usage_avg_5m 0.920 > 0.65",
        "planned: node-3 at 0.463",
    ]
    evicted = [text for _, text in dom.table("eviction")["2026-11-22T12:05:00Z team-a/big"]]
    assert evicted[-1] == "2026-11-22T12:05:00Z: dry-run"

    # the explain box shows the explain API's own answer (or its error)
    assert dom.by_id["explain-state"].split()[0] == str(explain_code) == "200"
    explained_rows = dom.table("explained")
    assert list(explained_rows) == [n["node"] for n in explained["nodes"]]  # best first, as the API
    for node in explained["nodes"]:
        texts = [text for _, text in explained_rows[node["node"]]]
        assert texts[1] == ("passes" if node["passed"] else "rejected")
        assert texts[2] == str(node["score"]["final"])
        assert texts[4] == (node["rejected_by"] or "")
    quota = explained["quota"]
    assert dom.by_id["explain-quota"].startswith(
        f"elastic quota: {'admits' if quota['admitted'] else 'refuses'} ({quota['rule']})"
    )


def test_screenshot_is_readable(cluster: tuple[Sandbox, str]) -> None:
    _, url = cluster
    OUT.mkdir(exist_ok=True)
    shot = OUT / "status-page.png"
    shot.unlink(missing_ok=True)
    browse(
        f"{url}/ui#token={TOKEN}&explain=team-a/worker",
        f"--screenshot={shot}",
        "--window-size=1440,1400",
    )
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_500_nodes_refresh_filter_and_scroll(cluster: tuple[Sandbox, str]) -> None:
    """At 500 nodes the page lists every node in the API's order, refreshes itself every
    10 s (counted by the extender), opens filtered from its address (``#nodes=…&only=bad``:
    rejected or stale nodes whose name contains the text), and its screenshot is taken."""
    box, url = cluster
    now = datetime.now(UTC)
    more = []
    for i in range(len(LOADS) + 1, 501):
        usage = (i * 37 % 100) / 100
        when = now - timedelta(minutes=20) if i % 50 == 0 else now
        annotations = {m: encode_metric(usage, when) for m in METRICS}
        more.append(NodeSpec(f"many-{i:03d}", "127.0.1.1", annotations=annotations))
    box.create_nodes(more)
    try:
        wait_for(
            lambda: get(f"{url}/v1/status")[1]["nodes"]["total"] == 500,
            timeout=60,
            what="500 nodes in /v1/status",
        )
        before = status_requests(url)
        dom = Cells()
        dom.feed(browse(f"{url}/ui#token={TOKEN}", "--dump-dom", budget=25))
        loads = status_requests(url) - before
        _, status = get(f"{url}/v1/status")
        items = status["nodes"]["items"]
        assert dom.by_id["count-total"] == "500"
        assert dom.by_id["shown"] == "500 of 500 shown"
        assert list(dom.table("node")) == [n["name"] for n in items]
        assert loads >= 3, loads  # at 0 s, 10 s and 20 s of the page's 25

        dom = Cells()
        dom.feed(browse(f"{url}/ui#token={TOKEN}&nodes=many-4&only=bad", "--dump-dom"))
        bad = [
            n["name"]
            for n in items
            if "many-4" in n["name"]
            and (not n["passes"] or any(m["state"] != "fresh" for m in n["metrics"].values()))
        ]
        assert 0 < len(bad) < 100
        assert list(dom.table("node")) == bad
        assert dom.by_id["shown"] == f"{len(bad)} of 500 shown"

        OUT.mkdir(exist_ok=True)
        shot = OUT / "status-page-500.png"
        shot.unlink(missing_ok=True)
        browse(f"{url}/ui#token={TOKEN}", f"--screenshot={shot}", "--window-size=1440,900")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        for spec in more:
            box.core.delete_node(spec.name)

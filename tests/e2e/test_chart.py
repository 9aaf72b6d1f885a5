"""charts/loadsched against the real API server: helm lint and template (defaults, and every
optional feature on), every rendered object accepted by a server-side dry run, and the chart's
scheduler configuration running a real kube-scheduler that calls the extender. (The services
of the other end-to-end tests already run as the chart's ServiceAccounts: see conftest.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from extender.cli import parse_args
from sandbox import chart
from sandbox.cluster import Sandbox
from sandbox.processes import wait_for
from sandbox.specs import pod_body
from tests.e2e.objects import sent_as, status_of
from tests.e2e.scrape import exported

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "chart"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALL_FEATURES = yaml.safe_load((FIXTURES / "all-features.yaml").read_text())
OPERATOR_APIS = (
    "monitoring.coreos.com/v1/PrometheusRule",
    "monitoring.coreos.com/v1/ServiceMonitor",
    "monitoring.coreos.com/v1/PodMonitor",
    "cert-manager.io/v1/Certificate",
)


def kinds(objects: list[dict[str, Any]]) -> set[str]:
    return {o["kind"] for o in objects}


def test_lint_defaults_and_every_feature() -> None:
    chart.lint()
    chart.lint(ALL_FEATURES)
    with pytest.raises(RuntimeError, match="additional properties 'replicaz' not allowed"):
        chart.lint({"extender": {"replicaz": 3}})
    with pytest.raises(RuntimeError, match="minimum: got 0, want 1"):
        chart.lint({"extender": {"replicas": 0}})
    with pytest.raises(RuntimeError, match="filterMessages"):
        chart.lint({"extender": {"filterMessages": "short"}})
    with pytest.raises(RuntimeError, match="filterRejections"):
        chart.lint({"extender": {"filterRejections": "some"}})


@pytest.mark.parametrize(
    ("style", "listing"), [("per-node", "when-none-pass"), ("per-reason", "always")]
)
def test_the_extenders_args_are_its_own_flags(style: str, listing: str) -> None:
    """Every flag the chart passes is one the extender knows (an unknown one exits 2)."""
    values = (
        {}
        if style == "per-node"
        else {
            "extender": {
                "filterMessages": style,
                "filterRejections": listing,
            }
        }
    )
    rendered = by_kind_and_name(chart.render(values))
    args = container(rendered[("Deployment", "loadsched-extender")])["args"]
    parsed = parse_args(args)
    assert (parsed.filter_messages, parsed.filter_rejections) == (style, listing)


def test_every_rendered_object_is_accepted(sandbox: Sandbox) -> None:
    sandbox.core.create_namespace(
        sent_as(k8s.V1Namespace, {"metadata": {"name": "loadsched-system"}})
    )
    chart.apply(
        sandbox, list(yaml.safe_load_all((FIXTURES / "stub-crds.yaml").read_text())), dry_run=False
    )
    defaults = chart.render(include_crds=True)
    assert kinds(defaults) >= {
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "ConfigMap",
        "ClusterRole",
    }
    everything = chart.render(ALL_FEATURES, api_versions=OPERATOR_APIS, include_crds=True)
    assert kinds(everything) - kinds(defaults) == {
        "PrometheusRule",
        "ServiceMonitor",
        "PodMonitor",
        "Certificate",
    }
    groups = {
        o["metadata"]["name"]: [g["name"] for g in o["spec"]["groups"]]
        for o in everything
        if o["kind"] == "PrometheusRule"
    }
    shipped = yaml.safe_load(
        (EXAMPLES.parent / "charts/loadsched/files/recording-rules.yaml").read_text()
    )
    assert list(groups.values()) == [[g["name"] for g in shipped["groups"]] + ["load-watcher"]]
    rules_only = chart.render(
        {"metrics": {"prometheusRule": {"enabled": True}}}, api_versions=OPERATOR_APIS
    )
    (rule,) = [o for o in rules_only if o["kind"] == "PrometheusRule"]
    assert "load-watcher" not in {g["name"] for g in rule["spec"]["groups"]}
    for objects in (defaults, everything):
        crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
        chart.apply(sandbox, crds, dry_run=False)  # the CRD first, as helm installs crds/
        wait_for(
            lambda: (
                "elasticquotas"
                in chart.kubectl(sandbox, "api-resources", "--api-group=scheduling.x-k8s.io")
            ),
            timeout=30,
            what="the ElasticQuota CRD to be served",
        )
        rest = [o for o in objects if o["kind"] != "CustomResourceDefinition"]
        output = chart.apply(sandbox, rest, dry_run=True)
        assert output.count("serverside-applied (server dry run)") == len(rest), output
    # the security context every container runs with
    for deployment in (o for o in everything if o["kind"] == "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in pod["containers"]:
            assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
            assert container["securityContext"]["readOnlyRootFilesystem"] is True


def extender_filters(url: str) -> float:
    return exported(url, "loadsched_extender_responses_total", code="200", verb="filter")


def test_the_charts_scheduler_configuration_calls_the_extender(
    sandbox: Sandbox, extender: str, tmp_path: Path
) -> None:
    objects = chart.render(
        {
            "scheduler": {
                "enabled": True,
                "schedulerName": "loadsched-chart",
                "extenderURL": extender,
            }
        },
        namespace="default",
    )
    config_map = next(
        o
        for o in objects
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-scheduler")
    )
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert config["extenders"][0]["nodeCacheCapable"] is True
    assert config["extenders"][0]["ignorable"] is True
    assert config["leaderElection"]["resourceName"] == "loadsched-scheduler"
    # in a cluster the pod's service account is used; here, a token of the same account
    kubeconfig = sandbox.service_kubeconfigs["scheduler"]
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    path = tmp_path / "scheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    sandbox.start_scheduler_from(
        "chart", path, scheduler_name="loadsched-chart", kubeconfig=kubeconfig
    )
    before = extender_filters(extender)
    sandbox.create_pods(
        [pod_body("chart-0", scheduler_name="loadsched-chart", labels={"app": "chart"})]
    )
    try:
        bound = sandbox.wait_bound("app=chart", 1, timeout=90)
        assert bound["chart-0"].startswith("node-")
        assert extender_filters(extender) > before
        lease = k8s.CoordinationV1Api(sandbox.api).read_namespaced_lease(
            "loadsched-scheduler", "default"
        )
        assert lease.spec is not None and lease.spec.holder_identity
    finally:
        sandbox.stop_scheduler("chart")
        sandbox.delete_pods("app=chart")


@pytest.mark.parametrize("example", ["scheduler-second.yaml", "scheduler-default-extender.yaml"])
def test_example_scheduler_configurations_run(
    sandbox: Sandbox, extender: str, tmp_path: Path, example: str
) -> None:
    """kube-scheduler validates the examples as they are, but for where things are here: the
    API server's credentials, the extender's address and a scheduler name of its own."""
    config = yaml.safe_load((EXAMPLES / example).read_text())
    config["clientConnection"] = {"kubeconfig": str(sandbox.service_kubeconfigs["scheduler"])}
    config["extenders"][0]["urlPrefix"] = extender
    config["profiles"][0]["schedulerName"] = f"example-{example.split('.')[0]}"
    if config.get("leaderElection", {}).get("leaderElect"):
        config["leaderElection"]["resourceNamespace"] = "default"
    else:
        config["leaderElection"] = {"leaderElect": False}
    path = tmp_path / example
    path.write_text(yaml.safe_dump(config))
    name = f"example-{example.split('.')[0]}"
    sandbox.start_scheduler_from(
        name,
        path,
        scheduler_name=config["profiles"][0]["schedulerName"],
        kubeconfig=sandbox.service_kubeconfigs["scheduler"],
    )
    sandbox.stop_scheduler(name)


DISPATCH_VALUES = {
    "dispatch": {
        "enabled": True,
        "templates": [{"name": "report", "namespace": "batch", "image": "registry.example/r:1"}],
    }
}


def by_kind_and_name(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return first


def grants_jobs(role: dict[str, Any]) -> bool:
    return any("batch" in rule["apiGroups"] for rule in role["rules"])


def test_the_grafana_dashboard_is_off_by_default_and_labelled_for_the_sidecar() -> None:
    def dashboards(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [o for o in objects if o["metadata"]["name"].endswith("-dashboard")]

    assert dashboards(chart.render()) == []
    (config,) = dashboards(chart.render(ALL_FEATURES))
    assert config["kind"] == "ConfigMap"
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config["metadata"]["annotations"] == {"grafana_folder": "loadsched"}
    shipped = json.loads((chart.CHART / "files" / "dashboard.json").read_text())
    assert json.loads(config["data"]["loadsched.json"]) == shipped
    (moved,) = dashboards(chart.render({"dashboard": {"enabled": True, "namespace": "grafana"}}))
    assert moved["metadata"]["namespace"] == "grafana"


def test_one_value_turns_the_rebalancer_on_with_its_own_permissions() -> None:
    from shared.policy import DEFAULT_POLICY_YAML, parse_policy

    def rendered(values: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
        objects = chart.render(values)
        (config,) = [o for o in objects if o["metadata"]["name"].endswith("-policy")]
        policy = parse_policy(yaml.safe_load(config["data"]["policy.yaml"]))
        return policy.spec.rebalance, objects

    def rules(objects: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
        return [
            rule
            for o in objects
            if o["kind"] in ("ClusterRole", "Role") and o["metadata"]["name"] == name
            for rule in o["rules"]
        ]

    off, objects = rendered({})
    assert not off.enabled
    annotator = rules(objects, "loadsched-annotator")
    assert not any("pods/eviction" in r["resources"] for r in annotator)
    on, objects = rendered({"rebalance": {"enabled": True}})
    assert on.enabled and not on.dry_run
    annotator = rules(objects, "loadsched-annotator")
    assert any(r["resources"] == ["pods/eviction"] and r["verbs"] == ["create"] for r in annotator)
    assert not any("pods/status" in r["resources"] for r in annotator)  # reclaim's, not ours
    status = rules(objects, "loadsched-extender-rebalance-status")
    assert status == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["loadsched-rebalance"],
            "verbs": ["get"],
        }
    ]
    # the policy's own spec.rebalance fields stay; the value only turns it on
    own = DEFAULT_POLICY_YAML + "  rebalance: {consecutiveRounds: 3}\n"
    kept, _ = rendered({"rebalance": {"enabled": True, "dryRun": True}, "policy": own})
    assert (kept.enabled, kept.dry_run, kept.consecutive_rounds) == (True, True, 3)


def test_dispatch_runs_apart_and_alone_holds_the_job_permissions() -> None:
    separate = by_kind_and_name(chart.render(DISPATCH_VALUES))
    extender = container(separate[("Deployment", "loadsched-extender")])
    dispatch_deployment = separate[("Deployment", "loadsched-dispatch")]
    dispatch = container(dispatch_deployment)
    assert "--serve=scheduling" in extender["args"]
    assert not any(a.startswith("--job-templates") for a in extender["args"])
    assert extender["readinessProbe"]["httpGet"]["path"] == "/readyz/scheduling"
    assert "--serve=dispatch" in dispatch["args"]
    assert "--job-templates=/etc/loadsched/dispatch/templates.yaml" in dispatch["args"]
    assert dispatch["readinessProbe"]["httpGet"]["path"] == "/readyz/dispatch"
    pod = dispatch_deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "loadsched-dispatch"
    assert ("Service", "loadsched-dispatch") in separate
    assert ("ServiceAccount", "loadsched-dispatch") in separate
    assert not grants_jobs(separate[("ClusterRole", "loadsched-extender")])
    assert grants_jobs(separate[("ClusterRole", "loadsched-dispatch")])

    together = by_kind_and_name(
        chart.render({"dispatch": {**DISPATCH_VALUES["dispatch"], "separate": False}})
    )
    assert ("Deployment", "loadsched-dispatch") not in together
    assert ("ServiceAccount", "loadsched-dispatch") not in together
    extender = container(together[("Deployment", "loadsched-extender")])
    assert "--serve=scheduling,dispatch" in extender["args"]
    assert "--job-templates=/etc/loadsched/dispatch/templates.yaml" in extender["args"]
    assert extender["readinessProbe"]["httpGet"]["path"] == "/readyz/scheduling"
    assert grants_jobs(together[("ClusterRole", "loadsched-extender")])


def may(sandbox: Sandbox, account: str, verb: str, resource: str, group: str) -> bool:
    review = k8s.AuthorizationV1Api(sandbox.api).create_subject_access_review(
        sent_as(
            k8s.V1SubjectAccessReview,
            {
                "spec": {
                    "user": f"system:serviceaccount:default:{account}",
                    "groups": ["system:serviceaccounts", "system:serviceaccounts:default"],
                    "resourceAttributes": {
                        "verb": verb,
                        "resource": resource,
                        "group": group,
                        "namespace": "batch",
                    },
                }
            },
        ),
    )
    return bool(status_of(review).allowed)


def test_the_extenders_account_cannot_touch_jobs_when_dispatch_runs_apart(
    sandbox: Sandbox,
) -> None:
    """The accounts the end-to-end services run as (conftest: dispatch enabled, separate by
    default), as the API server's authorizer answers for them."""
    assert not may(sandbox, "loadsched-extender", "create", "jobs", "batch")
    assert not may(sandbox, "loadsched-extender", "delete", "cronjobs", "batch")
    assert may(sandbox, "loadsched-extender", "list", "nodes", "")
    # the pod watch (estimation) and explain's pod; callers' tokens reviewed
    assert may(sandbox, "loadsched-extender", "get", "pods", "")
    assert may(sandbox, "loadsched-extender", "watch", "pods", "")
    assert may(sandbox, "loadsched-extender", "create", "tokenreviews", "authentication.k8s.io")
    assert may(
        sandbox, "loadsched-extender", "create", "subjectaccessreviews", "authorization.k8s.io"
    )
    assert not may(sandbox, "loadsched-extender", "delete", "pods", "")
    assert may(sandbox, "loadsched-dispatch", "create", "jobs", "batch")
    assert may(sandbox, "loadsched-dispatch", "list", "nodes", "")
    assert not may(sandbox, "loadsched-dispatch", "patch", "nodes", "")

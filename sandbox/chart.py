"""charts/loadsched on the sandbox: lint and render it with helm (built from its Go module),
apply what it renders (for real, or as a server-side dry run) with kubectl, and run loadsched's
services as the chart's own ServiceAccounts, so the end-to-end tests prove its RBAC suffices."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from sandbox.build import ROOT, ensure_helm
from sandbox.cluster import Sandbox

CHART = ROOT / "charts" / "loadsched"
RBAC_KINDS = frozenset(
    {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
)


def helm(*args: str) -> str:
    result = subprocess.run(
        [str(ensure_helm()), *args], capture_output=True, text=True, check=False, timeout=120
    )
    if result.returncode != 0:
        raise RuntimeError(f"helm {' '.join(args[:2])} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def _with_values(values: Mapping[str, Any] | None, args: list[str]) -> str:
    """Run helm with ``values`` (nested, as in values.yaml) from a temporary file."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
        yaml.safe_dump(dict(values or {}), file)
        file.flush()
        return helm(*args, "-f", file.name)


def lint(values: Mapping[str, Any] | None = None) -> str:
    return _with_values(values, ["lint", "--strict", str(CHART)])


def render(
    values: Mapping[str, Any] | None = None,
    *,
    release: str = "loadsched",
    namespace: str = "loadsched-system",
    api_versions: Iterable[str] = (),
    include_crds: bool = False,
) -> list[dict[str, Any]]:
    """The objects ``helm template`` renders, parsed."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    for version in api_versions:
        args += ["--api-versions", version]
    if include_crds:
        args.append("--include-crds")
    return [doc for doc in yaml.safe_load_all(_with_values(values, args)) if doc]


def kubectl(sandbox: Sandbox, *args: str, stdin: str | None = None) -> str:
    assert sandbox.bin is not None
    result = subprocess.run(
        [str(sandbox.bin / "kubectl"), "--kubeconfig", str(sandbox.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def apply(sandbox: Sandbox, objects: list[dict[str, Any]], *, dry_run: bool) -> str:
    """``kubectl apply --server-side`` (``--dry-run=server`` if asked): the API server validates
    every object as it would at install time."""
    args = ["apply", "--server-side", "--field-manager=loadsched-tests", "-f", "-"]
    if dry_run:
        args.append("--dry-run=server")
    return kubectl(sandbox, *args, stdin=yaml.safe_dump_all(objects))


def install_accounts(
    sandbox: Sandbox, *, namespace: str, values: Mapping[str, Any]
) -> dict[str, Path]:
    """Apply the chart's ServiceAccounts and RBAC for real; a kubeconfig with a token of each
    ServiceAccount, by component (``extender``, ``annotator``, ``scheduler``)."""
    objects = [o for o in render(values, namespace=namespace) if o["kind"] in RBAC_KINDS]
    apply(sandbox, objects, dry_run=False)
    kubeconfigs: dict[str, Path] = {}
    for account in (o for o in objects if o["kind"] == "ServiceAccount"):
        name = account["metadata"]["name"]
        component = account["metadata"]["labels"]["app.kubernetes.io/component"]
        kubeconfigs[component] = sandbox.write_token_kubeconfig(
            f"chart-{component}", service_account_token(sandbox, name, namespace)
        )
    return kubeconfigs


def service_account_token(sandbox: Sandbox, name: str, namespace: str) -> str:
    """A TokenRequest for the ServiceAccount, valid for a day."""
    request = k8s.AuthenticationV1TokenRequest(
        spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=86400)
    )
    answer = sandbox.core.create_namespaced_service_account_token(name, namespace, request)
    if answer.status is None:
        raise RuntimeError(f"serviceaccount/{namespace}/{name}: no token issued")
    return str(answer.status.token)

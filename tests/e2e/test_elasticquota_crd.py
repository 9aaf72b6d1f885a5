"""The ElasticQuota CRD shipped in charts/loadsched/crds is accepted by the real API server, and objects
of the scheduler-plugins shape round-trip through it and through loadsched's parser."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client as k8s

from sandbox.cluster import Sandbox
from shared.quota import ElasticQuota

pytestmark = pytest.mark.e2e

CRD = Path(__file__).resolve().parents[2] / "charts" / "loadsched" / "crds" / "elasticquota.yaml"


def test_crd_and_objects(sandbox: Sandbox) -> None:
    sandbox.install_crd(CRD)
    custom = k8s.CustomObjectsApi(sandbox.api)
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "quota", "namespace": "default"},
        "spec": {"min": {"cpu": "6", "memory": "8Gi"}, "max": {"cpu": 10, "nvidia.com/gpu": "2"}},
    }
    created = custom.create_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", "default", "elasticquotas", body
    )
    assert isinstance(created, dict)  # the client types a custom object as object
    quota = ElasticQuota.from_object(created)
    assert (
        quota.namespace == "default"
        and quota.guaranteed("cpu") == 6
        and quota.ceiling("nvidia.com/gpu") == 2
    )
    bad = {
        **body,
        "metadata": {"name": "bad", "namespace": "default"},
        "spec": {"min": {"cpu": "lots"}},
    }
    with pytest.raises(k8s.ApiException) as rejected:
        custom.create_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", "default", "elasticquotas", bad
        )
    assert rejected.value.status == 422
    custom.delete_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", "default", "elasticquotas", "quota"
    )

import pytest

from shared.kube.paths import (
    CONFIGMAPS,
    CRONJOBS,
    ELASTIC_QUOTAS,
    EVENTS,
    JOBS,
    LEASES,
    NODES,
    PODS,
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    Resource,
)


@pytest.mark.parametrize(
    ("resource", "name", "namespace", "subresource", "path"),
    [
        (NODES, "", "", "", "/api/v1/nodes"),
        (NODES, "n1", "", "", "/api/v1/nodes/n1"),
        (PODS, "", "", "", "/api/v1/pods"),
        (PODS, "", "ns", "", "/api/v1/namespaces/ns/pods"),
        (PODS, "p", "ns", "status", "/api/v1/namespaces/ns/pods/p/status"),
        (PODS, "p", "ns", "eviction", "/api/v1/namespaces/ns/pods/p/eviction"),
        (EVENTS, "", "ns", "", "/api/v1/namespaces/ns/events"),
        (CONFIGMAPS, "c", "ns", "", "/api/v1/namespaces/ns/configmaps/c"),
        (
            LEASES,
            "l",
            "kube-system",
            "",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
        ),
        (JOBS, "", "", "", "/apis/batch/v1/jobs"),
        (JOBS, "j", "ns", "", "/apis/batch/v1/namespaces/ns/jobs/j"),
        (CRONJOBS, "", "ns", "", "/apis/batch/v1/namespaces/ns/cronjobs"),
        (ELASTIC_QUOTAS, "", "", "", "/apis/scheduling.x-k8s.io/v1alpha1/elasticquotas"),
        (
            ELASTIC_QUOTAS,
            "q",
            "ns",
            "status",
            "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/elasticquotas/q/status",
        ),
        (TOKEN_REVIEWS, "", "", "", "/apis/authentication.k8s.io/v1/tokenreviews"),
        (SUBJECT_ACCESS_REVIEWS, "", "", "", "/apis/authorization.k8s.io/v1/subjectaccessreviews"),
    ],
)
def test_paths(resource: Resource, name: str, namespace: str, subresource: str, path: str) -> None:
    assert resource.path(name, namespace=namespace, subresource=subresource) == path


def test_api_version() -> None:
    assert (NODES.api_version, JOBS.api_version) == ("v1", "batch/v1")


@pytest.mark.parametrize(
    ("resource", "name", "subresource"), [(PODS, "p", ""), (NODES, "", "status")]
)
def test_incomplete_paths_are_refused(resource: Resource, name: str, subresource: str) -> None:
    with pytest.raises(ValueError):
        resource.path(name, subresource=subresource)

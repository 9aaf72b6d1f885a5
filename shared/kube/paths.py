"""Every API path loadsched uses, built in one place from a table of resources.

A path is ``/api/v1`` for the core group and ``/apis/<group>/<version>`` otherwise, then
``/namespaces/<ns>`` for a namespaced resource, the plural, the object's name and a
subresource (``status``, ``eviction``). Collections across all namespaces leave the namespace
out. Names are put in as they are: Kubernetes names are DNS labels or subdomains, and every
name here comes from the API server or from a validated template.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Resource:
    """One kind's REST collection: ``group`` is ``""`` for the core group."""

    group: str
    version: str
    plural: str
    namespaced: bool
    _prefix: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        object.__setattr__(self, "_prefix", root)

    @property
    def api_version(self) -> str:
        """``apiVersion`` of the kind's objects (``v1``, ``batch/v1``)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, name: str = "", *, namespace: str = "", subresource: str = "") -> str:
        """The collection (no ``name``), an object, or its ``subresource``.

        A namespaced resource without ``namespace`` is the collection across all namespaces;
        an object of a namespaced resource needs its namespace."""
        if self.namespaced and namespace:
            path = f"{self._prefix}/namespaces/{namespace}/{self.plural}"
        elif self.namespaced and name:
            raise ValueError(f"{self.plural}/{name}: a namespaced object needs its namespace")
        else:
            path = f"{self._prefix}/{self.plural}"
        if name:
            path = f"{path}/{name}"
            if subresource:
                path = f"{path}/{subresource}"
        elif subresource:
            raise ValueError(f"{self.plural}: subresource {subresource} needs an object name")
        return path


NODES = Resource("", "v1", "nodes", namespaced=False)
PODS = Resource("", "v1", "pods", namespaced=True)
EVENTS = Resource("", "v1", "events", namespaced=True)
CONFIGMAPS = Resource("", "v1", "configmaps", namespaced=True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", namespaced=True)
JOBS = Resource("batch", "v1", "jobs", namespaced=True)
CRONJOBS = Resource("batch", "v1", "cronjobs", namespaced=True)
ELASTIC_QUOTAS = Resource("scheduling.x-k8s.io", "v1alpha1", "elasticquotas", namespaced=True)
TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", namespaced=False)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", namespaced=False
)

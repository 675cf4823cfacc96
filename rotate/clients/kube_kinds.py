"""The Kubernetes kinds rotate touches, and where each lives in the API: the table behind
every path :class:`rotate.clients.kube.KubeClient` builds, and behind the permissions that
``rotate rbac`` grants and preflight checks (rotate.engine.grants, rotate.engine.access).

Invariant: a kind missing here is refused (:func:`kind_info`, a RejectedError naming it)
before any request — the adapter never guesses a path.  No third-party import: the engine
reads this table without loading the kubernetes client.
"""

from __future__ import annotations

from dataclasses import dataclass

from rotate.core.errors import RejectedError

SYSTEM = "kubernetes"


@dataclass(frozen=True)
class KindInfo:
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


KINDS: dict[str, KindInfo] = {
    "Namespace": KindInfo("", "v1", "namespaces", False),
    "Secret": KindInfo("", "v1", "secrets", True),
    "ConfigMap": KindInfo("", "v1", "configmaps", True),
    "Service": KindInfo("", "v1", "services", True),
    "Endpoints": KindInfo("", "v1", "endpoints", True),
    "Pod": KindInfo("", "v1", "pods", True),
    "ServiceAccount": KindInfo("", "v1", "serviceaccounts", True),  # apply: job's rotator
    "Event": KindInfo("", "v1", "events", True),
    "Deployment": KindInfo("apps", "v1", "deployments", True),
    "ReplicaSet": KindInfo("apps", "v1", "replicasets", True),
    "StatefulSet": KindInfo("apps", "v1", "statefulsets", True),
    "DaemonSet": KindInfo("apps", "v1", "daemonsets", True),
    "Job": KindInfo("batch", "v1", "jobs", True),  # apply: job's rotator runs
    "Lease": KindInfo("coordination.k8s.io", "v1", "leases", True),
    "PodDisruptionBudget": KindInfo("policy", "v1", "poddisruptionbudgets", True),
    "ExternalSecret": KindInfo("external-secrets.io", "v1", "externalsecrets", True),
    "SecretStore": KindInfo("external-secrets.io", "v1", "secretstores", True),
    "ClusterSecretStore": KindInfo("external-secrets.io", "v1", "clustersecretstores", False),
    # Vault Secrets Operator: read only, to find its rolloutRestartTargets (a second reloader)
    "VaultStaticSecret": KindInfo("secrets.hashicorp.com", "v1beta1", "vaultstaticsecrets", True),
    "VaultDynamicSecret": KindInfo("secrets.hashicorp.com", "v1beta1", "vaultdynamicsecrets",
                                   True),
}

#: External Secrets Operator's API group and the versions rotate speaks, preferred first:
#: ESO 0.17+ serves ``v1``; older releases only ``v1beta1`` (same fields rotate uses).
ESO_GROUP = "external-secrets.io"
ESO_VERSIONS = ("v1", "v1beta1")

def kind_info(kind: str) -> KindInfo:
    try:
        return KINDS[kind]
    except KeyError:
        raise RejectedError(SYSTEM, f"use kind {kind}", "kind not supported by rotate") from None

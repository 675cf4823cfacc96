"""The kinds the lab's API server knows, and how each is addressed.

One :class:`Kind` per kind.  The store keys objects by ``Kind.kind`` (``"Deployment"``); the
API server maps URL paths (``/apis/apps/v1/namespaces/NS/deployments``) to a Kind through
:func:`by_path`.  Discovery documents (``/api``, ``/apis``, ``/apis/G/V``) are generated from
this table, so adding a kind here is all it takes to serve it.

Invariants:

- ``versions[0]`` is the preferred (storage) version; objects are stored with that
  ``apiVersion``.  Other versions are served as aliases (ESO's ``v1beta1``): same objects, only
  ``apiVersion`` rewritten on the way out — enough for the fields the lab uses.
- ``virtual`` kinds (SelfSubjectAccessReview, TokenReview) are create-only and never stored.
"""

from __future__ import annotations

from dataclasses import dataclass

_CRUD = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str  # "" for the core group
    versions: tuple[str, ...]
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status: bool = False  # has a /status subresource
    scale: bool = False  # has a /scale subresource
    #: metadata.generation is kept and grows when anything but metadata/status changes
    generation: bool = False
    verbs: tuple[str, ...] = _CRUD
    virtual: bool = False

    @property
    def version(self) -> str:
        return self.versions[0]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def group_resource(self) -> str:
        """``deployments.apps`` / ``pods`` — the form real error messages use."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def api_version_for(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version


_ALL = ("all",)
_ESO_VERSIONS = ("v1", "v1beta1")

KINDS: tuple[Kind, ...] = (
    Kind("Namespace", "", ("v1",), "namespaces", "namespace", False, ("ns",), status=True,
         verbs=("create", "delete", "get", "list", "patch", "update", "watch")),
    Kind("Secret", "", ("v1",), "secrets", "secret", True),
    Kind("ConfigMap", "", ("v1",), "configmaps", "configmap", True, ("cm",)),
    Kind("Service", "", ("v1",), "services", "service", True, ("svc",), _ALL, status=True,
         verbs=("create", "delete", "get", "list", "patch", "update", "watch")),
    Kind("Endpoints", "", ("v1",), "endpoints", "endpoints", True, ("ep",)),
    Kind("Pod", "", ("v1",), "pods", "pod", True, ("po",), _ALL, status=True, generation=True),
    Kind("Event", "", ("v1",), "events", "event", True, ("ev",)),
    Kind("ServiceAccount", "", ("v1",), "serviceaccounts", "serviceaccount", True, ("sa",)),
    Kind("Deployment", "apps", ("v1",), "deployments", "deployment", True, ("deploy",), _ALL,
         status=True, scale=True, generation=True),
    Kind("ReplicaSet", "apps", ("v1",), "replicasets", "replicaset", True, ("rs",), _ALL,
         status=True, scale=True, generation=True),
    Kind("StatefulSet", "apps", ("v1",), "statefulsets", "statefulset", True, ("sts",), _ALL,
         status=True, scale=True, generation=True),
    Kind("DaemonSet", "apps", ("v1",), "daemonsets", "daemonset", True, ("ds",), _ALL,
         status=True, generation=True),
    Kind("ControllerRevision", "apps", ("v1",), "controllerrevisions", "controllerrevision",
         True),
    Kind("PersistentVolumeClaim", "", ("v1",), "persistentvolumeclaims",
         "persistentvolumeclaim", True, ("pvc",), status=True),
    Kind("Job", "batch", ("v1",), "jobs", "job", True, (), _ALL, status=True, generation=True),
    Kind("CronJob", "batch", ("v1",), "cronjobs", "cronjob", True, ("cj",), _ALL, status=True,
         generation=True),
    Kind("Lease", "coordination.k8s.io", ("v1",), "leases", "lease", True),
    Kind("PodDisruptionBudget", "policy", ("v1",), "poddisruptionbudgets",
         "poddisruptionbudget", True, ("pdb",), status=True, generation=True),
    Kind("Role", "rbac.authorization.k8s.io", ("v1",), "roles", "role", True),
    Kind("ClusterRole", "rbac.authorization.k8s.io", ("v1",), "clusterroles", "clusterrole",
         False),
    Kind("RoleBinding", "rbac.authorization.k8s.io", ("v1",), "rolebindings", "rolebinding",
         True),
    Kind("ClusterRoleBinding", "rbac.authorization.k8s.io", ("v1",), "clusterrolebindings",
         "clusterrolebinding", False),
    Kind("SelfSubjectAccessReview", "authorization.k8s.io", ("v1",), "selfsubjectaccessreviews",
         "selfsubjectaccessreview", False, verbs=("create",), virtual=True),
    Kind("TokenReview", "authentication.k8s.io", ("v1",), "tokenreviews", "tokenreview", False,
         verbs=("create",), virtual=True),
    Kind("SecretStore", "external-secrets.io", _ESO_VERSIONS, "secretstores", "secretstore",
         True, ("ss",), ("external-secrets",), status=True, generation=True),
    Kind("ClusterSecretStore", "external-secrets.io", _ESO_VERSIONS, "clustersecretstores",
         "clustersecretstore", False, ("css",), ("external-secrets",), status=True,
         generation=True),
    Kind("ExternalSecret", "external-secrets.io", _ESO_VERSIONS, "externalsecrets",
         "externalsecret", True, ("es",), ("external-secrets",), status=True, generation=True),
    # Vault Secrets Operator's kind, served (no controller) so that its rolloutRestartTargets —
    # a second reloader preflight must notice — can be shown in the lab.
    Kind("VaultStaticSecret", "secrets.hashicorp.com", ("v1beta1",), "vaultstaticsecrets",
         "vaultstaticsecret", True, ("vss",), status=True, generation=True),
)

_BY_NAME: dict[str, Kind] = {}
for _k in KINDS:
    for _alias in (_k.kind, _k.kind.lower(), _k.plural, *_k.short_names):
        _BY_NAME.setdefault(_alias, _k)
_BY_PATH: dict[tuple[str, str, str], Kind] = {
    (k.group, v, k.plural): k for k in KINDS for v in k.versions
}


def lookup(kind: str) -> Kind:
    """The Kind for ``"Deployment"`` (also ``"deployment"``, ``"deployments"``, ``"deploy"``).

    Raises KeyError for an unknown kind — the store turns that into a 404.
    """
    return _BY_NAME[kind] if kind in _BY_NAME else _BY_NAME[kind.lower()]


def by_path(group: str, version: str, plural: str) -> Kind | None:
    return _BY_PATH.get((group, version, plural))


def groups() -> dict[str, tuple[str, ...]]:
    """Group name → served versions (preferred first), core group ``""`` included, in order."""
    out: dict[str, tuple[str, ...]] = {}
    for k in KINDS:
        known = out.get(k.group, ())
        out[k.group] = known + tuple(v for v in k.versions if v not in known)
    return out


def kinds_in(group: str, version: str) -> list[Kind]:
    return [k for k in KINDS if k.group == group and version in k.versions]

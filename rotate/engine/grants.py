"""The least-privilege grants for a set of credentials, built from :mod:`rotate.engine.access`:
Kubernetes RBAC objects (``rotate rbac``) and an OpenBao/Vault policy (``rotate vault-policy``).

Nothing here decides *what* a run needs — :func:`~rotate.engine.access.permissions_needed`
and :func:`~rotate.engine.access.vault_grants` do; this module only groups that list the way
RBAC and HCL spell it.  So every rule generated here is checked by ``doctor`` and preflight,
and every permission they check is granted here.

Shape (deterministic: same chain, same bytes):

* one ServiceAccount; namespaced permissions → a Role + RoleBinding in each namespace;
  cluster-scoped ones (the lock Namespace ``get``) → a ClusterRole + ClusterRoleBinding;
* one rule per (API group, resource, verbs, named or not): ``resourceNames`` lists the
  objects when every permission in it names its object; a rule without ``resourceNames``
  holds what RBAC cannot restrict by name (``create``, namespace-wide list/watch).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rotate.chain.model import Chain, Credential
from rotate.clients.kube_kinds import kind_info
from rotate.engine.access import (
    Permission,
    VaultGrant,
    capabilities_self_grant,
    deduplicate,
    permissions_needed,
    vault_grants,
    watch_permissions,
)

RBAC_API = "rbac.authorization.k8s.io/v1"
MANAGED_BY = {"app.kubernetes.io/managed-by": "rotate"}
CREDENTIALS_ANNOTATION = "rotate.dev/credentials"
Obj = dict[str, Any]


@dataclass(frozen=True)
class ServiceAccountRef:
    namespace: str
    name: str

    @property
    def cluster_name(self) -> str:
        """ClusterRole/ClusterRoleBinding name: unique per ServiceAccount, a valid name."""
        return f"{self.namespace}.{self.name}"


def all_permissions(chain: Chain, credentials: Sequence[Credential]) -> list[Permission]:
    """Every credential's permissions, deduplicated as one list (first seen first)."""
    return deduplicate(p for cred in credentials for p in permissions_needed(chain, cred))


def _resource(perm: Permission) -> tuple[str, str]:
    info = kind_info(perm.kind)
    return info.group, info.plural + (f"/{perm.subresource}" if perm.subresource else "")


def rules(perms: Iterable[Permission]) -> list[Obj]:
    """RBAC PolicyRules granting exactly ``perms``, sorted."""
    verbs: dict[tuple[str, str, str | None], set[str]] = {}
    for p in perms:
        group, resource = _resource(p)
        verbs.setdefault((group, resource, p.name), set()).add(p.verb)
    grouped: dict[tuple[str, str, tuple[str, ...], bool], list[str]] = {}
    for (group, resource, name), verb_set in verbs.items():
        key = (group, resource, tuple(sorted(verb_set)), name is not None)
        names = grouped.setdefault(key, [])
        if name is not None:
            names.append(name)
    out: list[Obj] = []
    for (group, resource, sorted_verbs, named), names in sorted(grouped.items()):
        rule: Obj = {"apiGroups": [group], "resources": [resource]}
        if named:
            rule["resourceNames"] = sorted(names)
        rule["verbs"] = list(sorted_verbs)
        out.append(rule)
    return out


def _meta(name: str, namespace: str | None, credentials: Sequence[Credential]) -> Obj:
    md: Obj = {"name": name}
    if namespace is not None:
        md["namespace"] = namespace
    md["labels"] = dict(MANAGED_BY)
    md["annotations"] = {CREDENTIALS_ANNOTATION: ",".join(c.name for c in credentials)}
    return md


def rbac_objects(chain: Chain, credentials: Sequence[Credential],
                 sa: ServiceAccountRef, *, watch: bool = False) -> list[Obj]:
    """ServiceAccount, ClusterRole(+Binding) if needed, then Role + RoleBinding per namespace;
    ``watch``: with what ``rotate watch`` needs besides (access.watch_permissions)."""
    perms = all_permissions(chain, credentials)
    if watch:
        perms = deduplicate([*perms, *watch_permissions(chain, credentials)])
    subject = [{"kind": "ServiceAccount", "name": sa.name, "namespace": sa.namespace}]
    objects: list[Obj] = [{"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": _meta(sa.name, sa.namespace, credentials)}]
    cluster = [p for p in perms if p.namespace is None]
    if cluster:
        objects += [
            {"apiVersion": RBAC_API, "kind": "ClusterRole",
             "metadata": _meta(sa.cluster_name, None, credentials), "rules": rules(cluster)},
            {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding",
             "metadata": _meta(sa.cluster_name, None, credentials),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": sa.cluster_name},
             "subjects": subject},
        ]
    for ns in sorted({p.namespace for p in perms if p.namespace is not None}):
        objects += [
            {"apiVersion": RBAC_API, "kind": "Role", "metadata": _meta(sa.name, ns, credentials),
             "rules": rules(p for p in perms if p.namespace == ns)},
            {"apiVersion": RBAC_API, "kind": "RoleBinding",
             "metadata": _meta(sa.name, ns, credentials),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": sa.name},
             "subjects": subject},
        ]
    return objects


def policy_grants(chain: Chain, credentials: Sequence[Credential]) -> list[VaultGrant]:
    """Every credential's KV v2 grants, then ``sys/capabilities-self``; one per path."""
    by_path: dict[str, VaultGrant] = {}
    for cred in credentials:
        for grant in vault_grants(chain, cred):
            known = by_path.get(grant.path)
            caps = tuple(sorted(set(grant.capabilities) | set(known.capabilities if known
                                                               else ())))
            by_path[grant.path] = VaultGrant(grant.path, caps, grant.why)
    self_grant = capabilities_self_grant()
    return [*by_path.values(), self_grant]


def _hcl_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def vault_policy(chain: Chain, credentials: Sequence[Credential]) -> str:
    """The policy HCL granting exactly :func:`policy_grants`."""
    names = ", ".join(c.name for c in credentials)
    lines = [f"# OpenBao/Vault policy for rotate: {names}",
             "# generated by `rotate vault-policy`; doctor checks exactly these capabilities.",
             ""]
    for grant in policy_grants(chain, credentials):
        caps = ", ".join(_hcl_string(c) for c in grant.capabilities)
        lines += [f"# {grant.why}", f"path {_hcl_string(grant.path)} {{",
                  f"  capabilities = [{caps}]", "}", ""]
    return "\n".join(lines)

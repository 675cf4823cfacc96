"""Kubernetes RBAC for ServiceAccount tokens: Role, ClusterRole, RoleBinding and
ClusterRoleBinding objects in the store decide, evaluated the way kube-apiserver's RBAC
authorizer does.

Why: ``rotate rbac`` generates least-privilege RBAC and the lab must prove it — a token bound
to exactly those objects must be able to run a rotation, and one rule less must be refused.
So a ServiceAccount's requests are authorised by the bindings in the store, live (a
``kubectl apply`` of a Role changes what the next request may do), not by a fixed rule list.

Semantics (k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac):

- A ClusterRoleBinding grants its ClusterRole's rules everywhere (every namespace and the
  cluster scope).  A RoleBinding in namespace N grants its Role's (in N) or ClusterRole's rules
  only for namespaced requests in N.
- Subjects: ``ServiceAccount`` (name + namespace), ``User`` (the username
  ``system:serviceaccount:NS:NAME``), ``Group`` (``system:serviceaccounts``,
  ``system:serviceaccounts:NS``, ``system:authenticated``).
- A rule matches when verb, API group and resource match (``*`` matches any; ``*/SUB`` any
  resource's SUB subresource; ``pods`` does not cover ``pods/log``) and, when it lists
  ``resourceNames``, the request names one of them (a request without a name — create, a
  list or watch without a ``metadata.name`` field selector — never matches such a rule).
- Allow only; no deny.  As ``system:basic-user`` grants every authenticated user, a
  SelfSubjectAccessReview (and SelfSubjectRulesReview) may always be created.
- Aggregated ClusterRoles (``aggregationRule``) are not expanded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from rotate_lab.cluster.api.apierrors import ApiError
from rotate_lab.cluster.api.store import Store

GROUP = "rbac.authorization.k8s.io"
_SELF_REVIEWS = ("selfsubjectaccessreviews", "selfsubjectrulesreviews")


def rule_matches(rule: Mapping[str, Any], verb: str, group: str, resource: str,
                 name: str | None) -> bool:
    """One PolicyRule against one request (``resource`` is ``plural[/sub]``)."""
    verbs = rule.get("verbs") or []
    groups = rule.get("apiGroups") or []
    if not ("*" in verbs or verb in verbs) or not ("*" in groups or group in groups):
        return False
    sub = resource.partition("/")[2]
    resources = rule.get("resources") or []
    if not any(r == "*" or r == resource or (sub and r == f"*/{sub}") for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or (bool(name) and name in names)


@dataclass(frozen=True)
class ServiceAccountUser:
    """A ServiceAccount authenticated by a token the lab's issuer signed."""

    namespace: str
    service_account: str

    @property
    def name(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    @property
    def groups(self) -> tuple[str, ...]:
        return ("system:serviceaccounts", f"system:serviceaccounts:{self.namespace}",
                "system:authenticated")

    def is_subject(self, subject: Mapping[str, Any], binding_namespace: str | None) -> bool:
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "ServiceAccount":
            ns = subject.get("namespace") or binding_namespace
            return name == self.service_account and ns == self.namespace
        if kind == "User":
            return name == self.name
        if kind == "Group":
            return name in self.groups
        return False


class RbacIdentity:
    """The ``Identity`` interface of :mod:`rotate_lab.cluster.api.auth`, answered from the store."""

    def __init__(self, store: Store, user: ServiceAccountUser) -> None:
        self.store = store
        self.user = user

    @property
    def name(self) -> str:
        return self.user.name

    def allows(self, verb: str, group: str, resource: str, namespace: str | None = None,
               name: str | None = None) -> bool:
        return self.reason(verb, group, resource, namespace, name) != ""

    def reason(self, verb: str, group: str, resource: str, namespace: str | None = None,
               name: str | None = None) -> str:
        """Why the request is allowed (as kube-apiserver words it); "" when it is not."""
        if group == "authorization.k8s.io" and resource in _SELF_REVIEWS and verb == "create":
            return 'RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole ' \
                   '"system:basic-user" to Group "system:authenticated"'
        def allows(role: Mapping[str, Any]) -> bool:
            return any(isinstance(r, dict) and rule_matches(r, verb, group, resource, name)
                       for r in role.get("rules") or [])

        for where, role_kind, role_ns, role_name in self._granted(namespace):
            try:
                allowed = self.store.inspect(role_kind, role_ns, role_name, allows)
            except ApiError:
                continue  # a binding to a missing role grants nothing
            if allowed:
                return f'RBAC: allowed by {where} of {role_kind} "{role_name}" to ' \
                       f'ServiceAccount "{self.user.service_account}/{self.user.namespace}"'
        return ""

    def _granted(self, namespace: str | None) -> Iterator[tuple[str, str, str | None, str]]:
        """(binding description, role kind, role namespace, role name) of every binding that
        names this user and applies to ``namespace`` (None: a cluster-scoped request).  Only
        those bindings are copied out of the store, and the roles are read in place
        (:meth:`reason`): this runs on every request."""
        def names_user(ns: str | None) -> Callable[[dict[str, Any]], bool]:
            return lambda binding: any(isinstance(s, dict) and self.user.is_subject(s, ns)
                                       for s in binding.get("subjects") or [])

        scoped: list[tuple[dict[str, Any], str | None]] = [
            (b, None) for b in self.store.select("ClusterRoleBinding", None, names_user(None))]
        if namespace:
            scoped += [(b, namespace) for b in self.store.select(
                "RoleBinding", namespace, names_user(namespace))]
        for binding, ns in scoped:
            ref = binding.get("roleRef") or {}
            role_kind, role_name = str(ref.get("kind") or ""), str(ref.get("name") or "")
            if ref.get("apiGroup") != GROUP or role_kind not in ("Role", "ClusterRole"):
                continue
            if role_kind == "Role" and ns is None:
                continue  # a ClusterRoleBinding cannot refer to a Role
            md = binding.get("metadata") or {}
            where = (f'RoleBinding "{md.get("name")}/{ns}"' if ns
                     else f'ClusterRoleBinding "{md.get("name")}"')
            yield where, role_kind, ns if role_kind == "Role" else None, role_name


def name_from_field_selector(selector: str | None) -> str | None:
    """``metadata.name=X`` (or ``==X``) in a list/watch field selector: the request's object
    name for RBAC, as kube-apiserver derives it."""
    for term in (selector or "").split(","):
        key, op, value = term.partition("==") if "==" in term else term.partition("=")
        if op and key.strip() == "metadata.name":
            return value.strip()
    return None

"""Who is calling and what they may do: bearer-token identities with RBAC-like rules, and
ServiceAccount tokens authorised by the RBAC objects in the store
(:mod:`rotate_lab.cluster.api.rbac`).

The same ``allows`` answers every request and every SelfSubjectAccessReview, so
``rotate doctor`` (which asks SSAR) and the real calls it predicts cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rotate_lab.cluster.api.apierrors import ApiError

_READ = frozenset({"get", "list", "watch"})
_ALL = frozenset({"*"})


@dataclass(frozen=True)
class Rule:
    """Matches when verb, API group and resource match (``"*"`` matches anything).

    ``resource`` is ``plural`` or ``plural/subresource`` as in RBAC: a rule on
    ``deployments`` does not cover ``deployments/scale``.
    """

    verbs: frozenset[str]
    groups: frozenset[str]
    resources: frozenset[str]

    def matches(self, verb: str, group: str, resource: str) -> bool:
        return ((verb in self.verbs or "*" in self.verbs)
                and (group in self.groups or "*" in self.groups)
                and (resource in self.resources or "*" in self.resources))


class Authorizer(Protocol):
    """A caller: its user name, and whether (and why) it may make a request.  ``namespace``
    is None for cluster-scoped requests; ``name`` is the object's (None for create, and for a
    list or watch without a ``metadata.name`` field selector)."""

    @property
    def name(self) -> str: ...

    def allows(self, verb: str, group: str, resource: str, namespace: str | None = None,
               name: str | None = None) -> bool: ...

    def reason(self, verb: str, group: str, resource: str, namespace: str | None = None,
               name: str | None = None) -> str:
        """Why it is allowed, as kube-apiserver words it; "" exactly when it is not."""


@dataclass(frozen=True)
class Identity:
    """A user: allowed when some ``allow`` rule matches and no ``deny`` rule does."""

    name: str
    allow: tuple[Rule, ...]
    deny: tuple[Rule, ...] = ()

    def allows(self, verb: str, group: str, resource: str, namespace: str | None = None,
               name: str | None = None) -> bool:
        """Namespace and object name do not matter to these fixed rule lists."""
        if any(r.matches(verb, group, resource) for r in self.deny):
            return False
        return any(r.matches(verb, group, resource) for r in self.allow)

    def reason(self, verb: str, group: str, resource: str, namespace: str | None = None,
               name: str | None = None) -> str:
        if self.allows(verb, group, resource):
            return f'RBAC: allowed by ClusterRoleBinding "{self.name}" of ClusterRole ' \
                   f'"{self.name}" to User "{self.name}"'
        return ""

    @classmethod
    def admin(cls, name: str = "lab-admin") -> Identity:
        return cls(name, (Rule(_ALL, _ALL, _ALL),))

    @classmethod
    def restricted(cls, name: str = "lab-restricted") -> Identity:
        """Everything is allowed except exactly these rules:

        - ``get``, ``list``, ``watch`` on ``secrets`` (core group): it cannot read Secrets;
        - ``patch``, ``update`` on ``deployments`` and ``statefulsets`` (group ``apps``): it
          cannot restart workloads;
        - ``create``, ``update`` on ``leases`` (``coordination.k8s.io``): it cannot take the
          rotation lock.

        So it can plan and inspect (SelfSubjectAccessReview included) but a rotation fails
        preflight, which is what permission tests and ``rotate doctor`` need.
        """
        return cls(name, (Rule(_ALL, _ALL, _ALL),), (
            Rule(_READ, frozenset({""}), frozenset({"secrets"})),
            Rule(frozenset({"patch", "update"}), frozenset({"apps"}),
                 frozenset({"deployments", "statefulsets"})),
            Rule(frozenset({"create", "update"}), frozenset({"coordination.k8s.io"}),
                 frozenset({"leases"})),
        ))


#: what the lab fault ``list-forbidden`` withholds: listing (and watching) the kinds rotate
#: discovers Secret readers among
WITHHELD = frozenset({"deployments", "statefulsets", "daemonsets", "externalsecrets"})


@dataclass(frozen=True)
class Withheld:
    """``inner`` with the lab fault ``list-forbidden`` applied: it may not list or watch
    :data:`WITHHELD` in a namespace ``denied`` names (None: across the cluster) — as a
    missing RBAC grant looks, to the request and to a SelfSubjectAccessReview alike."""

    inner: Authorizer
    denied: Callable[[str | None], bool]

    @property
    def name(self) -> str:
        return self.inner.name

    def _withheld(self, verb: str, resource: str, namespace: str | None) -> bool:
        return verb in ("list", "watch") and resource in WITHHELD and self.denied(namespace)

    def allows(self, verb: str, group: str, resource: str, namespace: str | None = None,
               name: str | None = None) -> bool:
        return (not self._withheld(verb, resource, namespace)
                and self.inner.allows(verb, group, resource, namespace, name))

    def reason(self, verb: str, group: str, resource: str, namespace: str | None = None,
               name: str | None = None) -> str:
        if self._withheld(verb, resource, namespace):
            return ""
        return self.inner.reason(verb, group, resource, namespace, name)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(user: str, verb: str, group: str, resource: str, namespace: str | None,
              name: str | None) -> ApiError:
    plural, _, sub = resource.partition("/")
    qualified = f"{plural}.{group}" if group else plural
    subject = f'{qualified} "{name}"' if name else qualified
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    sub_text = f'resource "{plural}/{sub}"' if sub else f'resource "{plural}"'
    details: dict[str, Any] = {"kind": plural}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return ApiError(
        403, "Forbidden",
        f'{subject} is forbidden: User "{user}" cannot {verb} {sub_text} in API group '
        f'"{group}"{where}', details=details)


def access_review(identity: Authorizer, body: dict[str, Any]) -> dict[str, Any]:
    """Answer a SelfSubjectAccessReview body truthfully from ``identity``'s rules."""
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    attrs = spec.get("resourceAttributes")
    if isinstance(attrs, dict):
        resource = str(attrs.get("resource") or "")
        if attrs.get("subresource"):
            resource = f"{resource}/{attrs['subresource']}"
        verb, group = str(attrs.get("verb") or ""), str(attrs.get("group") or "")
        namespace, name = attrs.get("namespace") or None, attrs.get("name") or None
        reason = identity.reason(verb, group, resource, namespace, name)
        allowed = reason != ""
    else:  # nonResourceAttributes: discovery and health paths are open to every user
        allowed, reason = True, "non-resource URLs are readable by every lab user"
    status: dict[str, Any] = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}

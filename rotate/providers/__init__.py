"""Live provider methods: the seam a provider that keeps its password inside itself is
changed through (docs/providers.md).

The public surface, for the step kinds and for methods implemented elsewhere:

* :class:`ProviderMethod` (a Protocol) and the frozen values it trades in — :class:`Target`,
  :class:`Accounts`, :class:`Change`, :class:`Link`, :class:`ValueRule` — and
  :class:`Progress`, the step's journal a method may record facts in;
* :class:`MethodSpec` (what the chain file, the plan and the grants know of a method) with
  :class:`KubeAccess` / :class:`VaultAccess`, and :func:`register` / :func:`method_of`: the
  registry, chain ``apply:`` name → spec → object.  A plug-in distribution declares its spec
  as an entry point of the group ``rotate.providers`` (docs/providers.md).

Built in, registered the same way: ``redis-acl`` (:mod:`.redis_acl`) and ``postgres``
(:mod:`.postgres_roles`).
The package sits beside rotate.stages in the layers (pyproject ``[tool.importlinter]``):
it needs only the seams below it — rotate.clients' Protocols, the chain model, the core —
and imports no I/O driver; the built-in methods reach theirs through ``Link.connector``.
"""

from rotate.chain.methods import ENTRY_POINT_GROUP, KubeAccess, MethodSpec, VaultAccess
from rotate.providers.method import (
    Accounts,
    AdminSession,
    Change,
    Link,
    Progress,
    ProviderMethod,
    Target,
    ValueRule,
)
from rotate.providers.registry import method_of, names, register, unregister

__all__ = [
    "ENTRY_POINT_GROUP",
    "Accounts",
    "AdminSession",
    "Change",
    "KubeAccess",
    "Link",
    "MethodSpec",
    "Progress",
    "ProviderMethod",
    "Target",
    "ValueRule",
    "VaultAccess",
    "method_of",
    "names",
    "register",
    "unregister",
]

"""Live provider methods: the seam a provider that keeps its password inside itself is
changed through (docs/providers.md).

The public surface, for the step kinds and for methods implemented elsewhere:

* :class:`ProviderMethod` (a Protocol) and the frozen values it trades in — :class:`Target`,
  :class:`Accounts`, :class:`Change`, :class:`Link`, :class:`ValueRule` — and
  :class:`Progress`, the step's journal a method may record facts in;
* :func:`register` / :func:`method_of`: the registry, chain ``apply:`` name → factory.

Built in: ``redis-acl`` (:mod:`.redis_acl`) and ``postgres`` (:mod:`.postgres_roles`).
The package sits beside rotate.stages in the layers (pyproject ``[tool.importlinter]``):
it needs only the seams below it — rotate.clients' Protocols, the chain model, the core —
and imports no I/O driver; the built-in methods reach theirs through ``Link.connector``.
"""

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
    "Accounts",
    "AdminSession",
    "Change",
    "Link",
    "Progress",
    "ProviderMethod",
    "Target",
    "ValueRule",
    "method_of",
    "names",
    "register",
    "unregister",
]

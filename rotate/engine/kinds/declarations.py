"""What a step kind's class body declares with, beside its plain values (base.py): the
facts its journaled steps tell of the chain's state, and kinds its body cannot name yet.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, cast


class Told(enum.Enum):
    """What a journaled step tells of the chain's state now, about its subject (a provider
    ref, a consumer) or the credential; rotate.engine.chain_state puts it in words.  A kind
    declares which of these its steps tell, by journal status (``StepKind.tells``)."""

    BACKEND_WRITTEN = "the backend holds the run's value"
    SECRET_SYNCED = "the Secret holds the backend's value"
    BACKEND_RETIRED = "the previous key no longer holds the old value"
    BACKEND_UNCONFIRMED = "the backend's current version is not proven to be the run's"
    PROVIDER_ROLLED = "the provider rolled"
    PROVIDER_VERIFIED = "the provider accepts the value (proven from outside)"
    PROVIDER_APPLIED = "the provider was changed live"
    PROVIDER_MAY_BE_APPLIED = "the provider may have been changed live"
    PROVIDER_RESTARTED = "the provider's rollout began"
    PROVIDER_LIVE = "the provider is changed live, never rolled"
    PROVIDER_RETIRING = "the provider holds both values until it is retired"
    PROVIDER_RETIRED = "the provider no longer accepts the old value"
    DOCUMENT_WRITTEN = "the consumer's document holds the run's value"
    TOKEN_DELIVERED = "the consumer's new machine token is in its Secret"
    TOKENS_REVOKED = "the consumer's old machine tokens are revoked"
    CONSUMER_RESTARTED = "the consumer's rollout began"
    CONSUMER_ROLLED = "the consumer rolled"


#: ``StepKind.tells``' key for what a step tells whatever its status (it is planned)
PLANNED = "planned"
#: the journal statuses of a step that began and did not finish
BEGUN_UNFINISHED = ("running", "failed", "interrupted")

#: kinds, as ``undo`` names them (``type[StepKind]``: this module cannot name the class)
KindTuple = tuple[type[Any], ...]


class _Deferred:
    """A class attribute naming kinds its class body cannot name yet, resolved when it is
    read: the class itself (:data:`ITSELF`; a subclass reads itself), or kinds defined after
    it — a rollback form that subclasses the kind it undoes (:func:`later`)."""

    def __init__(self, resolve: Callable[[type[Any]], KindTuple]) -> None:
        self._resolve = resolve

    def __get__(self, obj: object, owner: type[Any]) -> KindTuple:
        return self._resolve(owner)


def later(kinds: Callable[[], KindTuple]) -> KindTuple:
    """``undo = later(lambda: (ApplyRestore, RetireReplaced))``: kinds named in the class body
    and looked up when read (they are defined further down the module)."""
    return cast(KindTuple, _Deferred(lambda _owner: kinds()))


#: ``undo = ITSELF``: a rollback runs the kind again (for the restored value)
ITSELF: KindTuple = cast(KindTuple, _Deferred(lambda owner: (owner,)))

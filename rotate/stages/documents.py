"""Stage ④ documents: a run writes and restores only the JSON pointers its credential owns.

A consumer's Config Center document holds the values of several credentials (``order``: a
Dragonfly password and a PostgreSQL login).  A credential *owns* the pointers whose values
derive from its target Secret — directly (``secretKey``) or through templates, transitively
(:func:`owned_pointers`); every other pointer belongs to someone else.  A run therefore
never writes a whole document: it reads the document as it is now, sets its owned pointers
and writes that, ``If-Match`` the version it read.

Invariants:

* every PUT is conditional on the version just read: a concurrent writer surfaces as 412,
  which re-reads and merges again, at most :data:`MERGES` times;
* the merge is made only when none of the owned pointers moved since ``base`` — the version
  the run read before it changed anything (a rotation) or the version it wrote (a restore).
  Otherwise :class:`OwnedMoved` names the pointers (never a value) and nothing is written:
  another credential's change to *its* pointers is kept, a change to ours is never lost;
* a value compared or written is revealed only in memory, for the comparison and the PUT.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rotate.chain.model import SecretKeyRef, SecretKeySource, Service
from rotate.chain.value_graph import derives_from, pointer_tokens
from rotate.clients.seams import ConfigCenter
from rotate.core.errors import ConflictError, NotFoundError, StepFailed
from rotate.core.secret import Secret, reveal_tree

#: how many times a write re-reads and merges after a 412 before it gives up
MERGES = 8


class OwnedMoved(StepFailed):
    """Someone else changed a pointer the credential owns; nothing was written."""

    def __init__(self, where: str, pointers: Sequence[str], since: int | None,
                 now: int | None, *, hint: str | None = None) -> None:
        self.pointers = tuple(pointers)
        shown = ", ".join(self.pointers)
        was = f"v{since}" if since is not None else "the run's read"
        # the hint goes into the message: a step's failure paragraph quotes only the message
        super().__init__(f"{where}: {shown} changed since {was} (now v{now}) by someone "
                         "other than this run; left as it is, nothing written"
                         + (f" — {hint}" if hint else ""), hint=hint)


def owned_pointers(service: Service, secret: SecretKeyRef) -> tuple[str, ...]:
    """The pointers of ``service``'s document whose values derive from the credential's
    target Secret — any key of it, so a username that changes with the password (alternating
    users) is owned too — directly or through templates; in file order."""
    def of_the_secret(source: SecretKeySource) -> bool:
        return (source.namespace, source.name) == (secret.namespace, secret.name)

    return tuple(p for p in service.values if derives_from(service.values, p, of_the_secret))


def _get(doc: Any, pointer: str) -> tuple[bool, Any]:
    node = doc
    for token in pointer_tokens(pointer):
        if not isinstance(node, Mapping) or token not in node:
            return False, None
        node = node[token]
    return True, node


def owned_values(doc: Mapping[str, Any], pointers: Sequence[str]) -> dict[str, Any]:
    """pointer → value (revealed, in memory only) for each owned pointer present in ``doc``."""
    out: dict[str, Any] = {}
    for p in pointers:
        found, value = _get(doc, p)
        if found:
            out[p] = reveal_tree(value)
    return out


def moved(pointers: Sequence[str], a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The pointers whose value (or presence) differs between two :func:`owned_values`."""
    missing = object()
    return [p for p in pointers if a.get(p, missing) != b.get(p, missing)]


def patched(doc: Mapping[str, Any], values: Mapping[str, Any],
            pointers: Sequence[str]) -> dict[str, Any]:
    """``doc`` with every owned pointer set to ``values`` (absent there: removed); the other
    pointers as they are.  Intermediate objects are created as needed."""
    out: dict[str, Any] = copy.deepcopy(reveal_tree(dict(doc)))
    for p in pointers:
        *parents, last = pointer_tokens(p)
        node: Any = out
        for token in parents:
            if p in values and not isinstance(node.get(token), dict):
                node[token] = {}
            node = node.get(token)
            if not isinstance(node, dict):
                break
        else:
            if p in values:
                node[last] = values[p]
            else:
                node.pop(last, None)
    return out


@dataclass(frozen=True)
class Written:
    version: int  # the version written (or found already holding the values)
    base: int | None  # the version it was written If-Match (None: created)
    merged: bool  # the document had moved (other pointers) and was merged
    changed: bool = True  # False: it already held the values, nothing written


def _read(cc: ConfigCenter, svc: str, key: str) -> tuple[int | None, dict[str, Any]]:
    try:
        doc = cc.get_key(svc, key)
    except NotFoundError:
        return None, {}
    return doc.version, dict(doc.value)


def _at(cc: ConfigCenter, svc: str, key: str, version: int | None) -> dict[str, Any]:
    return {} if version is None else dict(cc.get_version(svc, key, version).value)


def write_owned(
    cc: ConfigCenter, svc: str, key: str, pointers: Sequence[str], values: Mapping[str, Any],
    *, base: int | None, full: Mapping[str, Any] | None = None,
    on_attempt: Callable[[int | None], None] | None = None,
    on_lost: Callable[[int | None], None] | None = None, hint: str | None = None,
) -> Written:
    """Set ``pointers`` to ``values`` on the current document, If-Match what was read.

    ``base``: the version whose owned values the current ones must still equal (what the run
    read before changing anything; None: the document did not exist).  ``full``: the whole
    document to create when the key does not exist yet.  ``on_attempt(version)`` runs before
    each PUT with the If-Match it uses (the journal's record of a write that may be applied),
    ``on_lost(version)`` after a PUT the server refused (412: certainly not applied).
    Raises :class:`OwnedMoved` when an owned pointer moved since ``base``.
    """
    where = f"{svc}/{key}"
    want = {p: reveal_tree(v) for p, v in values.items()}
    before: dict[str, Any] | None = None
    for _ in range(MERGES):
        version, doc = _read(cc, svc, key)
        now = owned_values(doc, pointers)
        if version is not None and not moved(pointers, now, want):
            return Written(version, version, version != base, changed=False)
        if version != base:
            if before is None:
                before = owned_values(_at(cc, svc, key, base), pointers)
            if moved(pointers, now, before):
                raise OwnedMoved(where, moved(pointers, now, before), base, version, hint=hint)
        body = _wrap(patched(doc, want, pointers)) if version is not None else dict(full or {})
        if on_attempt is not None:
            on_attempt(version)
        try:
            written = cc.put_key(svc, key, body, if_match=version)
        except ConflictError:
            if on_lost is not None:
                on_lost(version)
            continue  # someone wrote meanwhile: read and merge again
        return Written(written, version, version != base)
    raise ConflictError("config center", f"write {where}",
                        f"the document kept moving; {MERGES} merges in a row lost the race")


def restore_owned(
    cc: ConfigCenter, svc: str, key: str, pointers: Sequence[str], *, restore_from: int,
    reference: int | None, hint: str | None = None,
) -> Written:
    """Put back the owned values of version ``restore_from`` onto the current document.

    ``reference``: the version whose owned values the current ones must equal (the version
    the run wrote); None (``--force``) restores whatever they hold now — still only the owned
    pointers, never another credential's.  Raises :class:`OwnedMoved` otherwise.
    """
    where = f"{svc}/{key}"
    old = owned_values(_at(cc, svc, key, restore_from), pointers)
    ref = owned_values(_at(cc, svc, key, reference), pointers) if reference is not None \
        else None
    for _ in range(MERGES):
        version, doc = _read(cc, svc, key)
        if version is None:
            raise NotFoundError("config center", f"restore {where}", "key no longer exists")
        now = owned_values(doc, pointers)
        if not moved(pointers, now, old):
            return Written(version, version, False, changed=False)
        if ref is not None and moved(pointers, now, ref):
            raise OwnedMoved(where, moved(pointers, now, ref), reference, version, hint=hint)
        try:
            written = cc.put_key(svc, key, _wrap(patched(doc, old, pointers)), if_match=version)
        except ConflictError:
            continue
        return Written(written, version, version != reference)
    raise ConflictError("config center", f"restore {where}",
                        f"the document kept moving; {MERGES} merges in a row lost the race")


def _wrap(value: Any) -> Any:
    """Every string leaf as a Secret: a 422 of the restore cannot quote a value back."""
    if isinstance(value, str):
        return Secret(value)
    if isinstance(value, Mapping):
        return {k: _wrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def may_have_written(
    cc: ConfigCenter, svc: str, key: str, pointers: Sequence[str], attempts: Sequence[int],
) -> int | None:
    """The version an unjournaled write of the run made, or None: an attempt If-Match ``b``
    that was applied is version ``b + 1`` and changed the owned pointers (a write that lost
    its race changed nothing there).  Used by rollback for a write journaled as attempted."""
    for b in sorted(set(attempts), reverse=True):
        try:
            after = owned_values(_at(cc, svc, key, b + 1), pointers)
        except NotFoundError:
            continue
        if moved(pointers, after, owned_values(_at(cc, svc, key, b), pointers)):
            return b + 1
    return None

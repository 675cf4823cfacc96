"""Stage ④ tokens: a fresh Config Center machine token per consumer, delivered to its Secret.

Only token *ids* are recorded (journal, report); the token itself goes from the Config
Center answer straight into the Secret through ``Kube.write_secret_key``.  Old tokens are
revoked at the very end, once the consumer runs with its new token, so a failed run never
leaves a service without a working token.

One live token per consumer, whoever mints: two runs of different credentials sharing a
consumer each mint a token for it, possibly at once.  The rule is *the newest mint wins*:

* tokens are ordered by when the Config Center minted them (:func:`mint_order`: its listing,
  stably sorted by ``created_at`` — the reference server lists in mint order);
* the token Secret carries the id of the token it holds (annotation
  :data:`TOKEN_ID_ANNOTATION`, written in the same patch as the token), and a delivery is
  conditional on the Secret's resourceVersion: it never replaces a newer token — a run that
  finds one is *superseded*, revokes its own token at once and leaves the newer one, which
  the consumer's pods then read;
* a run revokes the live tokens minted before the one it delivered (or, superseded, before
  the one that superseded it) — never that one, never a newer one: a newer token belongs to
  a run that is still delivering it, and that run revokes ours once its own pods are proven.

So the deliveries only move forward, and the run that delivered the last token — the one in
the Secret at the end — revokes every older one: one live token remains, whatever the offset
between the runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

from rotate.clients.seams import ConfigCenter, Kube, MintedToken
from rotate.core.errors import ConflictError, NotFoundError

#: the annotation on a token Secret naming the id of the token it holds
TOKEN_ID_ANNOTATION = "rotate.dev/token-id"
#: how many times a delivery re-reads a Secret that changed under it
DELIVERIES = 8


def current_ids(cc: ConfigCenter, service: str) -> list[str]:
    """Ids of the service's tokens that are not revoked (to revoke after the run)."""
    return [t.id for t in cc.list_tokens(service) if not t.revoked]


def ensure_secret(kube: Kube, namespace: str, name: str) -> None:
    """Create an empty Opaque Secret when it does not exist yet (never with a value in it:
    the value goes in through write_secret_key, the one path that handles Secret values)."""
    try:
        kube.get("Secret", namespace, name)
    except NotFoundError:
        kube.create("Secret", namespace, {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "rotate"}},
        })


def mint_order(cc: ConfigCenter, service: str) -> list[tuple[str, bool]]:
    """(id, revoked) of every token of ``service``, oldest mint first."""
    listed = cc.list_tokens(service)
    return [(t.id, t.revoked) for t in sorted(listed, key=lambda t: t.created_at)]


def _newer(order: list[tuple[str, bool]], held: str, mine: str) -> bool:
    """Whether ``held`` is live and was minted after ``mine``."""
    ids = [tid for tid, _ in order]
    live = {tid for tid, revoked in order if not revoked}
    return held in live and mine in ids and ids.index(held) > ids.index(mine)


def deliver(
    cc: ConfigCenter, kube: Kube, service: str, namespace: str, secret_name: str, key: str,
    minted: MintedToken, older: Iterable[str] = (),
) -> str | None:
    """Write ``minted`` into the token Secret unless it holds a newer token; None when
    delivered, else the newer token's id (``minted`` is then superseded, not delivered).

    ``older``: ids known to be older (held before the run): no listing needed for those.
    """
    known = set(older)
    for _ in range(DELIVERIES):
        try:
            obj = kube.get("Secret", namespace, secret_name)
        except NotFoundError:  # rare (a consumer mounts its token Secret): created empty
            ensure_secret(kube, namespace, secret_name)
            continue
        meta = obj.get("metadata") or {}
        held = (meta.get("annotations") or {}).get(TOKEN_ID_ANNOTATION)
        if held and held != minted.id and held not in known \
                and _newer(mint_order(cc, service), held, minted.id):
            return str(held)
        try:
            kube.write_secret_key(namespace, secret_name, key, minted.token,
                                  annotations={TOKEN_ID_ANNOTATION: minted.id},
                                  resource_version=str(meta.get("resourceVersion") or "")
                                  or None)
        except ConflictError:
            continue  # another delivery (or any change) came first: look again
        return None
    raise ConflictError("kubernetes", f"deliver token to secret/{namespace}/{secret_name}",
                        f"the Secret kept changing; {DELIVERIES} deliveries lost the race")


def mint_and_deliver(
    cc: ConfigCenter, kube: Kube, service: str, namespace: str, secret_name: str, key: str,
    *, on_minted: Callable[[str], None] | None = None, label: str | None = None,
    older: Iterable[str] = (),
) -> tuple[str, str | None]:
    """Mint a token for ``service`` and deliver it to ``namespace/secret_name#key``: its id,
    and the id of a newer token that superseded it (None: delivered).  A superseded token is
    revoked at once: nothing will ever read it.

    ``on_minted(id)`` runs between minting and delivery, so the caller can journal the id of
    a token that exists before it is delivered (and revoke it later if delivery fails).
    """
    minted = cc.mint_token(service, label)
    if on_minted is not None:
        on_minted(minted.id)
    newer = deliver(cc, kube, service, namespace, secret_name, key, minted, older)
    if newer is not None:
        revoke(cc, service, [minted.id])
    return minted.id, newer


def older_than(cc: ConfigCenter, service: str, cutoff: str) -> list[str] | None:
    """The live tokens of ``service`` minted before ``cutoff``; None when ``cutoff`` is not
    listed (the caller falls back to the ids it knows)."""
    order = mint_order(cc, service)
    ids = [tid for tid, _ in order]
    if cutoff not in ids:
        return None
    return [tid for tid, revoked in order[:ids.index(cutoff)] if not revoked]


def minted_by(cc: ConfigCenter, service: str, label: str, since: str,
              before: Iterable[str]) -> list[str]:
    """Live tokens of ``service`` a run minted: tagged with its ``label`` (run id), or — on a
    Config Center that does not keep labels — created at or after ``since`` (the run's
    journaled intent, RFC 3339 UTC) and not among the ``before`` ids it held already."""
    held = set(before)
    out = []
    for t in cc.list_tokens(service):
        if t.revoked:
            continue
        if t.label == label or (t.label is None and since and t.id not in held
                                and t.created_at[:19] >= since[:19]):
            out.append(t.id)
    return out


def revoke(cc: ConfigCenter, service: str, ids: Iterable[str]) -> list[str]:
    """Revoke each id (already gone counts as revoked); the ids revoked."""
    done: list[str] = []
    for token_id in ids:
        with contextlib.suppress(NotFoundError):
            cc.revoke_token(service, token_id)
        done.append(token_id)
    return done

"""Stage ④ tokens: a fresh Config Center machine token per consumer, delivered to its Secret.

Only token *ids* are recorded (journal, report); the token itself goes from the Config
Center answer straight into the Secret through ``Kube.write_secret_key``.  The ids a
service held before the run are listed first and revoked at the very end, once every
consumer runs with its new token, so a failed run never leaves a service without a
working token.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

from rotate.clients.seams import ConfigCenter, Kube
from rotate.core.errors import NotFoundError


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


def mint_and_deliver(
    cc: ConfigCenter, kube: Kube, service: str, namespace: str, secret_name: str, key: str,
    *, on_minted: Callable[[str], None] | None = None, label: str | None = None,
) -> str:
    """Mint a token for ``service`` and write it to ``namespace/secret_name#key``; its id.

    ``on_minted(id)`` runs between minting and delivery, so the caller can journal the id of
    a token that exists before it is delivered (and revoke it later if delivery fails).
    The Secret is written without a read first; only a missing one is created (empty), then
    written.
    """
    minted = cc.mint_token(service, label)
    if on_minted is not None:
        on_minted(minted.id)
    try:
        kube.write_secret_key(namespace, secret_name, key, minted.token)
    except NotFoundError:  # rare (a consumer mounts its token Secret): no GET before each
        ensure_secret(kube, namespace, secret_name)
        kube.write_secret_key(namespace, secret_name, key, minted.token)
    return minted.id


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

"""Why OpenBao said 403: the token, or its policy (preflight and doctor).

OpenBao answers ``403 permission denied`` alike to a token it does not know — expired,
revoked, mistyped — and to a valid token whose policies lack the path.  The fixes differ (log
in again, or apply the policy), so a refusal is followed by the token's own lookup
(``auth/token/lookup-self``, which the default policy grants):

* the lookup answers: the token is valid, its policy is what is missing;
* the lookup is refused too: ``sys/capabilities-self`` decides — ``rotate vault-policy``
  grants it even to a token created with ``-no-default-policy``, which cannot look itself up —
  answered, the token is valid; refused, it is invalid or expired, or such a token without
  that grant (no request tells those two apart, so the message names both).

Only what the token is (valid, time left, policy names) is shown, never the token.
"""

from __future__ import annotations

from collections.abc import Sequence

from rotate.chain.model import Chain
from rotate.clients.seams import Vault, VaultToken
from rotate.core.durations import format_duration
from rotate.core.errors import ForbiddenError
from rotate.engine.access import CAPABILITIES_SELF, policy_fix

LOOKUP_SELF = "auth/token/lookup-self"


def _token_fix(chain: Chain) -> str:
    auth = chain.backend.auth
    if auth.method == "token":
        return ("log in again (`bao login`) or renew it (`bao token renew`), then set "
                "VAULT_TOKEN (or BAO_TOKEN) to the new token")
    return (f"rotate logs in with {auth.method} auth (mount {auth.mount_path}); check that "
            "the login's role still issues tokens and their TTL")


def token_state(vault: Vault, chain: Chain) -> VaultToken | None:
    """The token's lookup; None when it is valid but may not look itself up.  ForbiddenError
    naming the fix when OpenBao does not know the token (invalid or expired)."""
    try:
        return vault.lookup_self()
    except ForbiddenError:
        pass
    try:
        vault.capabilities([LOOKUP_SELF])
    except ForbiddenError:
        raise ForbiddenError("vault", "look up the token",
                             f"the token is invalid or expired: {_token_fix(chain)} (a token "
                             "created with -no-default-policy may instead lack update on "
                             f"{CAPABILITIES_SELF}, which `rotate vault-policy` grants)",
                             status=403) from None
    return None


def describe_token(vault: Vault, chain: Chain) -> str:
    """doctor's ``backend.token``: valid, for how long, with which policies."""
    info = token_state(vault, chain)
    if info is None:
        return f"valid (its policies do not grant {LOOKUP_SELF}, which is fine)"
    left = "never expires" if info.ttl == 0 else f"expires in {format_duration(info.ttl)}"
    renew = ", renewable" if info.renewable else ""
    return f"valid, {left}{renew} (policies: {', '.join(info.policies) or 'none'})"


def explain_forbidden(vault: Vault, chain: Chain, names: Sequence[str],
                      refused: ForbiddenError) -> ForbiddenError:
    """``refused`` (a 403 of ``names``' paths) said again with its cause and its fix."""
    try:
        info = token_state(vault, chain)
    except ForbiddenError as invalid:
        return ForbiddenError(refused.system, refused.operation, invalid.reason,
                              status=refused.status)
    held = f" ({', '.join(info.policies)})" if info is not None else ""
    return ForbiddenError(refused.system, refused.operation,
                          f"the token is valid but its policies{held} do not allow this: "
                          f"{policy_fix(names)}", status=refused.status)

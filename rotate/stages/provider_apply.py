"""Stage ③ for providers that hold their own password: observe, act, prove, undo.

Methods (docs/chain-file.md "Provider apply methods"):

* ``redis-acl``: an ACL user holds several passwords.  Overlap = add the new one
  (``>new``), consumers move, retire = remove the old one (``<old``).  Restart = the
  immediate swap ``resetpass >new`` (every other password of the user goes too).
* ``postgres``: a role holds one password, sent only as a SCRAM verifier.  Restart = set the
  new verifier on the role.  Overlap = alternating users: the new value goes to the
  inactive role (verifier + ``LOGIN``), consumers move to it, retire = ``NOLOGIN`` on the
  role they left (its verifier is kept, so undoing the retirement is ``LOGIN`` again).

Invariants:

* Every act observes first and is a no-op when the provider is already in the target state,
  so resume may call it again.  Observation is *from outside* (a fresh AUTH/login through
  an :class:`AuthProbe`), the same view a consumer connecting now has.
* Passwords arrive as :class:`Secret` and leave only through the adapters.  What a function
  returns (:class:`Change`) is safe for the journal: names and booleans, never a value.
* Refusal is an answer, not an error: ``accepts`` returns False.  Only an unreachable provider
  raises (TemporaryError, retried until the step's deadline by :func:`prove`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rotate.chain.model import ProviderApply
from rotate.clients.seams import AuthProbe, PostgresAdmin, RedisAclAdmin
from rotate.core.errors import ForbiddenError, NotFoundError, PermanentError
from rotate.core.scram import scram_verifier
from rotate.core.secret import Secret
from rotate.core.waiting import Deadline, WaitTimeout, wait_for


class ProviderProofFailed(PermanentError):
    """provider.verify: the provider does not accept the new value, or (hard cut, retire)
    still accepts the old one.  ``hint`` names the likely cause."""

    def __init__(self, system: str, operation: str, reason: str, *, hint: str) -> None:
        super().__init__(system, operation, f"{reason}; likely cause: {hint}")
        self.hint = hint


@dataclass(frozen=True)
class Accounts:
    """Which account gets the new value and which holds the old one now.  The same name
    except for alternating users, where ``new`` is the inactive role."""

    new: str
    old: str

    @property
    def alternating(self) -> bool:
        return self.new != self.old


@dataclass(frozen=True)
class Acceptance:
    new: bool  # accounts.new accepts the new value
    old: bool  # accounts.old accepts the old value


@dataclass(frozen=True)
class Change:
    """What an act did (``changed``) or found already done; journal-safe."""

    changed: bool
    detail: str
    record: Mapping[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- set-up


def accounts_for(applied: ProviderApply, strategy: str, active: str | None) -> Accounts:
    """The accounts of this run.  ``active``: the username the backend holds now (alternating
    users only; absent means the first of ``users``)."""
    if applied.users is None:
        user = applied.user or ""
        return Accounts(user, user)
    first, second = applied.users
    current = active or first
    if current not in applied.users:
        raise PermanentError(applied.method, f"alternating users of {applied.provider}",
                             f"the backend names role {current!r}, which is not one of "
                             f"users [{first}, {second}]")
    if strategy != "overlap":
        return Accounts(current, current)  # a hard cut on the active role
    return Accounts(second if current == first else first, current)


def observe(probe: AuthProbe, accounts: Accounts, old: Secret, new: Secret) -> Acceptance:
    return Acceptance(new=probe.accepts(accounts.new, new), old=probe.accepts(accounts.old, old))


# --------------------------------------------------------------------------- redis-acl


def redis_preflight(admin: RedisAclAdmin, probe: AuthProbe, accounts: Accounts,
                    old: Secret) -> str:
    """Observe only: the user exists, is enabled, has passwords, and accepts the old value."""
    user = admin.user(accounts.old)
    if not user.enabled:
        raise PermanentError("redis", f"ACL user {user.name}", "the user is disabled (off)")
    if user.nopass:
        raise PermanentError("redis", f"ACL user {user.name}",
                             "the user is nopass (any password works): nothing to rotate")
    if not probe.accepts(accounts.old, old):
        raise PermanentError("redis", f"AUTH {user.name}",
                             "the provider refuses the current value from the backend")
    return f"ACL user {user.name} on, {user.password_count} password(s), current value accepted"


def redis_apply(admin: RedisAclAdmin, probe: AuthProbe, accounts: Accounts, old: Secret,
                new: Secret, strategy: str) -> Change:
    user = accounts.new
    seen = observe(probe, accounts, old, new)
    if strategy == "overlap":
        if seen.new:
            return Change(False, f"{user} already accepts the new password", {"user": user})
        admin.add_password(user, new)
        return Change(True, f"ACL SETUSER {user} >(new): old and new both valid",
                      {"user": user})
    if seen.new and not seen.old:
        return Change(False, f"{user} already holds only the new password", {"user": user})
    admin.set_only_password(user, new)
    return Change(True, f"ACL SETUSER {user} resetpass >(new): the swap is done",
                  {"user": user})


def redis_retire(admin: RedisAclAdmin, probe: AuthProbe, accounts: Accounts,
                 old: Secret) -> Change:
    user = accounts.old
    if not probe.accepts(user, old):
        return Change(False, f"{user} already refuses the old password", {"user": user})
    admin.remove_password(user, old)
    return Change(True, f"ACL SETUSER {user} <(old): the old password is valid nowhere",
                  {"user": user})


def redis_undo_apply(admin: RedisAclAdmin, probe: AuthProbe, accounts: Accounts,
                     old: Secret, new: Secret) -> Change:
    """Old accepted again first, then the new one removed (both for either strategy, so a
    consumer still on the old value never sees a refusal)."""
    user = accounts.old
    changed = False
    if not probe.accepts(user, old):
        admin.add_password(user, old)
        changed = True
    if probe.accepts(accounts.new, new):
        admin.remove_password(accounts.new, new)
        changed = True
    return Change(changed, f"{user} holds the old password again, not the new one",
                  {"user": user})


def redis_undo_retire(admin: RedisAclAdmin, probe: AuthProbe, accounts: Accounts,
                      old: Secret) -> Change:
    user = accounts.old
    if probe.accepts(user, old):
        return Change(False, f"{user} already accepts the old password", {"user": user})
    admin.add_password(user, old)
    return Change(True, f"ACL SETUSER {user} >(old): the old password is valid again",
                  {"user": user})


# --------------------------------------------------------------------------- postgres


def postgres_preflight(admin: PostgresAdmin, probe: AuthProbe, accounts: Accounts,
                       old: Secret) -> str:
    """Observe only: the roles exist, the admin may alter them, alternating roles have the
    same grants, and the active role logs in with the old value."""
    roles = [accounts.old] + ([accounts.new] if accounts.alternating else [])
    for role in roles:
        if not admin.role_exists(role):
            raise NotFoundError("postgres", f"role {role}", "does not exist (rotate creates "
                                "nothing: create it with the same grants)")
        if not admin.can_alter(role):
            raise ForbiddenError("postgres", f"role {role}", "the admin may not ALTER it "
                                 "(needs superuser, or CREATEROLE with ADMIN OPTION)")
    if accounts.alternating:
        diff = admin.grants(accounts.old).differences(admin.grants(accounts.new))
        if diff:
            raise PermanentError("postgres", f"roles {accounts.old} and {accounts.new}",
                                 "alternating roles must have the same grants: "
                                 + "; ".join(diff[:5]))
    if not probe.accepts(accounts.old, old):
        raise PermanentError("postgres", f"login as {accounts.old}",
                             "the provider refuses the current value from the backend")
    return f"role(s) {', '.join(roles)} ready; {accounts.old} logs in with the current value"


def postgres_before(admin: PostgresAdmin, accounts: Accounts) -> dict[str, Any]:
    """Facts to journal before the first act (undo restores them): the new role's LOGIN."""
    return {"role": accounts.new, "could_login": admin.role(accounts.new).can_login}


def postgres_apply(admin: PostgresAdmin, probe: AuthProbe, accounts: Accounts,
                   new: Secret) -> Change:
    role = accounts.new
    if probe.accepts(role, new):
        return Change(False, f"{role} already logs in with the new password", {"role": role})
    admin.set_password(role, scram_verifier(new).text)
    if accounts.alternating:
        admin.set_login(role, True)
        return Change(True, f"{role}: new SCRAM verifier, LOGIN (the consumers move to it)",
                      {"role": role})
    return Change(True, f"{role}: new SCRAM verifier (the old password is refused)",
                  {"role": role})


def postgres_retire(admin: PostgresAdmin, probe: AuthProbe, accounts: Accounts,
                    old: Secret) -> Change:
    """Alternating users, phase 2: NOLOGIN on the role the consumers left.  Sessions already
    open stay (PostgreSQL never ends them): their count is reported, not waited for."""
    role = accounts.old
    sessions = admin.sessions(role)
    record = {"role": role, "sessions": sessions}
    tail = f"; {sessions} session(s) of {role} still open" if sessions else ""
    if not probe.accepts(role, old) and not admin.role(role).can_login:
        return Change(False, f"{role} is already NOLOGIN{tail}", record)
    admin.set_login(role, False)
    return Change(True, f"{role}: NOLOGIN{tail}", record)


def postgres_undo_apply(admin: PostgresAdmin, probe: AuthProbe, accounts: Accounts,
                        old: Secret, before: Mapping[str, Any]) -> Change:
    """Single role: the old verifier again.  Alternating: the new role's LOGIN as it was
    (its earlier password is not known to rotate; it keeps the rolled-back one)."""
    if accounts.alternating:
        could = bool(before.get("could_login", False))
        if admin.role(accounts.new).can_login == could:
            return Change(False, f"{accounts.new} LOGIN is as before", {"role": accounts.new})
        admin.set_login(accounts.new, could)
        return Change(True, f"{accounts.new}: {'LOGIN' if could else 'NOLOGIN'} as before",
                      {"role": accounts.new})
    if probe.accepts(accounts.old, old):
        return Change(False, f"{accounts.old} already logs in with the old password",
                      {"role": accounts.old})
    admin.set_password(accounts.old, scram_verifier(old).text)
    return Change(True, f"{accounts.old}: the old password's verifier again",
                  {"role": accounts.old})


def postgres_undo_retire(admin: PostgresAdmin, probe: AuthProbe, accounts: Accounts,
                         old: Secret) -> Change:
    if probe.accepts(accounts.old, old):
        return Change(False, f"{accounts.old} already logs in", {"role": accounts.old})
    admin.set_login(accounts.old, True)
    return Change(True, f"{accounts.old}: LOGIN again", {"role": accounts.old})


# --------------------------------------------------------------------------- verify


_HINTS = {
    ("rollout", "postgres"): "PostgreSQL reads POSTGRES_PASSWORD only when its data directory "
                             "is initialised (initdb); a restart changes nothing: use apply: "
                             "postgres",
    ("rollout", "redis"): "the provider reads its password only when it is initialised, or "
                          "not from this Secret key: use apply: redis-acl",
}


def _hint(applied: ProviderApply, protocol: str) -> str:
    return _HINTS.get((applied.method, protocol),
                      "the change did not reach the server behind the Service (another "
                      "server or a replica answering?); rollback restores the old password")


def prove(probe: AuthProbe, applied: ProviderApply, accounts: Accounts, old: Secret,
          new: Secret, *, phase: str, protocol: str, deadline: Deadline) -> str:
    """provider.verify, from outside.  ``phase``:

    * ``"cut"`` (strategy restart): the new value is accepted and the old one refused;
    * ``"overlap"`` (phase 1): the new value is accepted and the old one still is;
    * ``"retired"`` (after retire): the new value is accepted and the old one refused.

    Retries until ``deadline`` (a rolled-out pod may need a moment behind its Service); then
    ProviderProofFailed with what was last seen and the likely cause.
    """
    want_old = phase == "overlap"
    last: list[Acceptance] = []

    def check() -> bool | None:
        seen = observe(probe, accounts, old, new)
        last[:] = [seen]
        return True if seen.new and seen.old == want_old else None

    try:
        wait_for(check, deadline=deadline, what=f"{applied.provider} accepts the new value")
    except WaitTimeout:
        seen = last[0] if last else None
        raise ProviderProofFailed(
            protocol, f"verify {applied.provider}", _proof_reason(seen, accounts, want_old),
            hint=_hint(applied, protocol)) from None
    old_word = "still accepts" if want_old else "refuses"
    return (f"{accounts.new} accepts the new value from outside; {accounts.old} {old_word} "
            "the old one")


def prove_accepts(probe: AuthProbe, applied: ProviderApply, user: str, value: Secret, *,
                  refused: tuple[str, Secret] | None, protocol: str,
                  deadline: Deadline) -> str:
    """A rollback's proof: ``user`` logs in with the restored ``value`` (and, with
    ``refused``, that account no longer accepts the value the rollback replaced)."""

    def check() -> bool | None:
        if not probe.accepts(user, value):
            return None
        if refused is not None and probe.accepts(*refused):
            return None
        return True

    try:
        wait_for(check, deadline=deadline, what=f"{applied.provider} accepts the restored value")
    except WaitTimeout:
        raise ProviderProofFailed(
            protocol, f"verify {applied.provider}",
            f"{user} does not accept the restored value" if refused is None else
            f"{user} does not accept the restored value, or the replaced one still works",
            hint=_hint(applied, protocol)) from None
    tail = f"; {refused[0]} refuses the replaced one" if refused is not None else ""
    return f"{user} accepts the restored value from outside{tail}"


def _proof_reason(seen: Acceptance | None, accounts: Accounts, want_old: bool) -> str:
    if seen is None:
        return "unreachable until the deadline"
    if not seen.new:
        return f"{accounts.new} refuses the new value"
    if want_old:
        return f"{accounts.old} already refuses the old value (consumers not moved yet)"
    return f"{accounts.old} still accepts the old value"

"""``MariaDbMethod``: rotate's ProviderMethod protocol over ``ALTER USER``.

Restart (one ``user``, or the active one of ``users``): the new hash on the account.
Overlap (``users: [a, b]``): the inactive account gets the new hash and ``ACCOUNT UNLOCK``,
the consumers move to it, retire = ``ACCOUNT LOCK`` on the account they left (its hash is
kept, so undoing the retirement is ``ACCOUNT UNLOCK``; open sessions are reported, never
killed).  Rollback mirrors it.  Every change looks from outside first (a fresh login) and does
nothing when the account already is in the target state, so a resumed run may repeat it.
Nothing is created or dropped.
"""

from __future__ import annotations

from rotate.chain.model import ProviderApply
from rotate.clients.provider_seams import AuthProbe
from rotate.core.errors import ForbiddenError, NotFoundError, PermanentError
from rotate.core.secret import Secret
from rotate.providers import Change, Link, Progress, Target, ValueRule
from rotate_provider_mariadb.client import MariaDbAdmin, MariaDbProbe

DEFAULT_HOST = "%"


def _host(link: Link) -> str:
    """The accounts' host part: the chain's ``host`` field (MethodSpec.fields), or ``%``."""
    return str(link.settings.options.get("host") or DEFAULT_HOST)


class _Session:
    """The admin session with the accounts' host part, which every statement needs."""

    def __init__(self, admin: MariaDbAdmin, host: str) -> None:
        self.admin, self.host = admin, host

    def close(self) -> None:
        self.admin.close()


class MariaDbMethod:
    values = ValueRule()
    restart_hint = ("MariaDB reads MARIADB_PASSWORD only when its data directory is "
                    "initialised; a restart changes nothing: use apply: mariadb")

    def describe_apply(self, applied: ProviderApply, *, overlap: bool) -> str:
        if applied.users is not None and overlap:
            return (f"inactive one of {applied.users[0]}/{applied.users[1]}: "
                    "IDENTIFIED BY PASSWORD (hash of the new value), ACCOUNT UNLOCK")
        return "ALTER USER … IDENTIFIED BY PASSWORD (hash of the new value)"

    def describe_retire(self, applied: ProviderApply) -> str:
        return "ACCOUNT LOCK on the account the consumers left"

    def retires_replaced(self, applied: ProviderApply) -> bool:
        return applied.users is not None  # one account: restoring its hash was the cut

    def open_probe(self, link: Link) -> AuthProbe:
        return MariaDbProbe(link.address)

    def open_admin(self, link: Link, user: str, password: Secret) -> _Session:
        return _Session(MariaDbAdmin.connect(link.address, user, password), _host(link))

    def preflight(self, session: _Session, probe: AuthProbe, target: Target) -> str:
        """The accounts exist, the admin may alter them, alternating accounts have the same
        grants, and the active one logs in with the current value."""
        admin, host, accounts = session.admin, session.host, target.accounts
        names = [accounts.old] + ([accounts.new] if accounts.alternating else [])
        for name in names:
            if not admin.exists(name, host):
                raise NotFoundError("mysql", f"account {name}@{host}", "does not exist (rotate "
                                    "creates nothing: create it with the same grants)")
        if not admin.may_alter_users():
            raise ForbiddenError("mysql", "the admin account", "needs global CREATE USER "
                                 "(or ALL PRIVILEGES) to ALTER USER")
        if accounts.alternating and admin.grants(accounts.old, host) != admin.grants(
                accounts.new, host):
            raise PermanentError("mysql", f"accounts {accounts.old} and {accounts.new}",
                                 "alternating accounts must have the same grants")
        if not probe.accepts(accounts.old, target.old):
            raise PermanentError("mysql", f"login as {accounts.old}",
                                 "the provider refuses the current value from the backend")
        return f"account(s) {', '.join(names)} ready; {accounts.old} logs in with the current value"

    def apply(self, session: _Session, probe: AuthProbe, target: Target,
              progress: Progress) -> Change:
        admin, host, user = session.admin, session.host, target.accounts.new
        if "was_locked" not in progress.prior:
            progress.record(account=user, was_locked=admin.locked(user, host))
        if probe.accepts(user, target.new):
            return Change(False, f"{user} already logs in with the new password")
        admin.set_password(user, host, target.new)
        if target.accounts.alternating:
            admin.set_locked(user, host, False)
            return Change(True, f"{user}: new password hash, ACCOUNT UNLOCK (the consumers "
                                "move to it)")
        return Change(True, f"{user}: new password hash (the old password is refused)")

    def retire(self, session: _Session, probe: AuthProbe, target: Target) -> Change:
        return _lock(session, probe, target.accounts.old, target.old)

    def restore(self, session: _Session, probe: AuthProbe, target: Target) -> Change:
        admin, host, user = session.admin, session.host, target.accounts.old
        if probe.accepts(user, target.old):
            return Change(False, f"{user} already logs in with the old password")
        if target.accounts.alternating:
            admin.set_locked(user, host, False)
            return Change(True, f"{user}: ACCOUNT UNLOCK again")
        admin.set_password(user, host, target.old)
        return Change(True, f"{user}: the old password's hash again")

    def retire_replaced(self, session: _Session, probe: AuthProbe, target: Target) -> Change:
        return _lock(session, probe, target.accounts.new, target.new)


def _lock(session: _Session, probe: AuthProbe, user: str, value: Secret) -> Change:
    """``ACCOUNT LOCK`` on ``user`` unless it already is locked and refuses ``value``."""
    admin, host = session.admin, session.host
    sessions = admin.sessions(user)
    tail = f"; {sessions} session(s) of {user} still open" if sessions else ""
    if admin.locked(user, host) and not probe.accepts(user, value):
        return Change(False, f"{user} is already locked{tail}")
    admin.set_locked(user, host, True)
    return Change(True, f"{user}: ACCOUNT LOCK{tail}")

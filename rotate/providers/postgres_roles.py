"""The built-in method for PostgreSQL login roles: a role holds one password, sent only as a
SCRAM-SHA-256 verifier that libpq computes on the admin session, never as text.

Restart = the new verifier on the role.  Overlap = alternating users: the new value goes to
the inactive role (verifier + ``LOGIN``), consumers move to it, retire = ``NOLOGIN`` on the
role they left (its verifier is kept, so undoing the retirement is ``LOGIN`` again; open
sessions are reported, never ended).  rotate never reads ``pg_authid`` and never creates or
drops roles.  The driver is psycopg behind ``link.connector`` (rotate.clients.postgres).
"""

from __future__ import annotations

from rotate.chain.model import ProviderApply
from rotate.clients.provider_seams import AuthProbe, PostgresAdmin
from rotate.core.errors import ForbiddenError, NotFoundError, PermanentError
from rotate.core.secret import Secret
from rotate.providers.method import Change, Link, Progress, Target, ValueRule


class PostgresRolesMethod:
    """:class:`~rotate.providers.method.ProviderMethod` over ``ALTER ROLE``."""

    #: SCRAM-SHA-256 never sends the password, only a proof (measured: a 65536-byte password
    #: logs in over SCRAM with PostgreSQL 15 and libpq 18).  But a server whose pg_hba.conf says
    #: ``password`` (cleartext, checked against the verifier rotate stores) reads the
    #: PasswordMessage with PG_MAX_AUTH_TOKEN_LENGTH = 65535 bytes — length word and the
    #: terminating NUL included — so a longer password is an "invalid message length" and the
    #: connection closes: 65530 bytes is the longest that logs in (measured on 15.18).
    values = ValueRule(max_bytes=65530,
                       why="PostgreSQL reads a password message of at most 65535 bytes "
                           "(PG_MAX_AUTH_TOKEN_LENGTH) under pg_hba's password method")
    restart_hint = ("PostgreSQL reads POSTGRES_PASSWORD only when its data directory is "
                    "initialised (initdb); a restart changes nothing: use apply: postgres")

    def describe_apply(self, applied: ProviderApply, *, overlap: bool) -> str:
        if applied.users is not None and overlap:
            return (f"inactive one of {applied.users[0]}/{applied.users[1]}: SCRAM verifier of "
                    "the new value, LOGIN")
        return "ALTER ROLE … PASSWORD (SCRAM-SHA-256 verifier of the new value)"

    def describe_retire(self, applied: ProviderApply) -> str:
        return "NOLOGIN on the role the consumers left"

    def retires_replaced(self, applied: ProviderApply) -> bool:
        return applied.users is not None  # one role: restoring its verifier was the cut

    def open_probe(self, link: Link) -> AuthProbe:
        conn = link.settings
        return link.connector.postgres_probe(link.address, database=conn.database,
                                             sslmode=conn.sslmode)

    def open_admin(self, link: Link, user: str, password: Secret) -> PostgresAdmin:
        conn = link.settings
        return link.connector.postgres_admin(link.address, user, password,
                                             database=conn.database, sslmode=conn.sslmode)

    def preflight(self, admin: PostgresAdmin, probe: AuthProbe, target: Target) -> str:
        """The roles exist, the admin may alter them, alternating roles have the same grants,
        and the active role logs in with the current value."""
        system, accounts = target.protocol, target.accounts
        roles = [accounts.old] + ([accounts.new] if accounts.alternating else [])
        for role in roles:
            if not admin.role_exists(role):
                raise NotFoundError(system, f"role {role}", "does not exist (rotate creates "
                                    "nothing: create it with the same grants)")
            if not admin.can_alter(role):
                raise ForbiddenError(system, f"role {role}", "the admin may not ALTER it "
                                     "(needs superuser, or CREATEROLE with ADMIN OPTION)")
        if accounts.alternating:
            diff = admin.grants(accounts.old).differences(admin.grants(accounts.new))
            if diff:
                raise PermanentError(system, f"roles {accounts.old} and {accounts.new}",
                                     "alternating roles must have the same grants: "
                                     + "; ".join(diff[:5]))
        if not probe.accepts(accounts.old, target.old):
            raise PermanentError(system, f"login as {accounts.old}",
                                 "the provider refuses the current value from the backend")
        return (f"role(s) {', '.join(roles)} ready; {accounts.old} logs in with the current "
                "value")

    def apply(self, admin: PostgresAdmin, probe: AuthProbe, target: Target,
              progress: Progress) -> Change:
        role = target.accounts.new
        if "could_login" not in progress.prior:  # the new role's LOGIN before the first act
            progress.record(role=role, could_login=admin.role(role).can_login)
        if probe.accepts(role, target.new):
            return Change(False, f"{role} already logs in with the new password")
        admin.set_password(role, target.new)
        if target.accounts.alternating:
            admin.set_login(role, True)
            return Change(True, f"{role}: new SCRAM verifier, LOGIN (the consumers move to it)")
        return Change(True, f"{role}: new SCRAM verifier (the old password is refused)")

    def retire(self, admin: PostgresAdmin, probe: AuthProbe, target: Target) -> Change:
        return _nologin(admin, probe, target.accounts.old, target.old)

    def restore(self, admin: PostgresAdmin, probe: AuthProbe, target: Target) -> Change:
        """Alternating: ``LOGIN`` on the old role again (it kept its verifier).  One role: the
        old password's verifier again (which also cuts the replaced value off)."""
        role = target.accounts.old
        if target.accounts.alternating:
            if probe.accepts(role, target.old):
                return Change(False, f"{role} already logs in")
            admin.set_login(role, True)
            return Change(True, f"{role}: LOGIN again")
        if probe.accepts(role, target.old):
            return Change(False, f"{role} already logs in with the old password")
        admin.set_password(role, target.old)
        return Change(True, f"{role}: the old password's verifier again")

    def retire_replaced(self, admin: PostgresAdmin, probe: AuthProbe,
                        target: Target) -> Change:
        return _nologin(admin, probe, target.accounts.new, target.new)


def _nologin(admin: PostgresAdmin, probe: AuthProbe, role: str, value: Secret) -> Change:
    """``NOLOGIN`` on ``role`` unless it already neither logs in with ``value`` nor may log
    in.  Sessions already open stay (PostgreSQL never ends them): counted, not waited for."""
    sessions = admin.sessions(role)
    tail = f"; {sessions} session(s) of {role} still open" if sessions else ""
    if not probe.accepts(role, value) and not admin.role(role).can_login:
        return Change(False, f"{role} is already NOLOGIN{tail}")
    admin.set_login(role, False)
    return Change(True, f"{role}: NOLOGIN{tail}")

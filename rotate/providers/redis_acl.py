"""The built-in method for a Redis 6+ / Dragonfly ACL user: it holds several passwords.

Overlap = add the new one (``>new``), consumers move, retire = remove the old one
(``<old``).  Restart = the immediate swap ``resetpass >new`` (every other password of the
user goes too).  Rollback: ``>old`` again, then, once the consumers moved back, ``<new``.
The driver is redis-py behind ``link.connector`` (rotate.clients.redis_acl).
"""

from __future__ import annotations

from rotate.chain.model import DEFAULT_REDIS_USER, ProviderApply
from rotate.clients.provider_seams import AuthProbe, RedisAclAdmin
from rotate.core.errors import PermanentError
from rotate.core.secret import Secret
from rotate.providers.method import Change, Link, Progress, Target, ValueRule


class RedisAclMethod:
    """:class:`~rotate.providers.method.ProviderMethod` over ``ACL SETUSER``."""

    #: AUTH is the first command a consumer sends, and Redis (6.2.6+, 7.x) reads it as an
    #: unauthenticated client: any argument longer than 16384 bytes is refused with
    #: "Protocol error: unauthenticated bulk length" and the connection closed (networking.c,
    #: the CVE-2021-32675 fix).  The admin session could still set a longer password (it is
    #: authenticated), but no consumer, probe or admin could ever log in with it.
    values = ValueRule(max_bytes=16384,
                       why="Redis refuses an AUTH argument over 16384 bytes from an "
                           "unauthenticated client")
    restart_hint = ("the provider reads its password only when it is initialised, or not "
                    "from this Secret key: use apply: redis-acl")

    def describe_apply(self, applied: ProviderApply, *, overlap: bool) -> str:
        user = applied.user or DEFAULT_REDIS_USER
        return (f"ACL SETUSER {user} >(new): old and new both valid" if overlap else
                f"ACL SETUSER {user} resetpass >(new): immediate swap")

    def describe_retire(self, applied: ProviderApply) -> str:
        return "ACL SETUSER … <(old)"

    def retires_replaced(self, applied: ProviderApply) -> bool:
        return True

    def open_probe(self, link: Link) -> AuthProbe:
        return link.connector.redis_probe(link.address, tls=link.settings.tls)

    def open_admin(self, link: Link, user: str, password: Secret) -> RedisAclAdmin:
        return link.connector.redis_admin(link.address, user, password,
                                          tls=link.settings.tls)

    def preflight(self, admin: RedisAclAdmin, probe: AuthProbe, target: Target) -> str:
        """The user exists, is enabled, has passwords, and accepts the current value."""
        system = target.protocol
        user = admin.user(target.accounts.old)
        if not user.enabled:
            raise PermanentError(system, f"ACL user {user.name}", "the user is disabled (off)")
        if user.nopass:
            raise PermanentError(system, f"ACL user {user.name}",
                                 "the user is nopass (any password works): nothing to rotate")
        if not probe.accepts(target.accounts.old, target.old):
            raise PermanentError(system, f"AUTH {user.name}",
                                 "the provider refuses the current value from the backend")
        return (f"ACL user {user.name} on, {user.password_count} password(s), current value "
                "accepted")

    def apply(self, admin: RedisAclAdmin, probe: AuthProbe, target: Target,
              progress: Progress) -> Change:
        user = target.accounts.new
        new_ok = probe.accepts(user, target.new)
        old_ok = probe.accepts(target.accounts.old, target.old)
        if target.strategy == "overlap":
            if new_ok:
                return Change(False, f"{user} already accepts the new password")
            admin.add_password(user, target.new)
            return Change(True, f"ACL SETUSER {user} >(new): old and new both valid")
        if new_ok and not old_ok:
            return Change(False, f"{user} already holds only the new password")
        admin.set_only_password(user, target.new)
        return Change(True, f"ACL SETUSER {user} resetpass >(new): the swap is done")

    def retire(self, admin: RedisAclAdmin, probe: AuthProbe, target: Target) -> Change:
        return _remove(admin, probe, target.accounts.old, target.old)

    def restore(self, admin: RedisAclAdmin, probe: AuthProbe, target: Target) -> Change:
        user = target.accounts.old
        if probe.accepts(user, target.old):
            return Change(False, f"{user} already accepts the old password")
        admin.add_password(user, target.old)
        return Change(True, f"ACL SETUSER {user} >(old): the old password is valid again")

    def retire_replaced(self, admin: RedisAclAdmin, probe: AuthProbe,
                        target: Target) -> Change:
        return _remove(admin, probe, target.accounts.new, target.new)


def _remove(admin: RedisAclAdmin, probe: AuthProbe, user: str, value: Secret) -> Change:
    """``<value`` on ``user`` unless it already refuses it (retire; a rollback's retire of
    the value it replaced, which the run had made the user's newest)."""
    if not probe.accepts(user, value):
        return Change(False, f"{user} already refuses the old password")
    admin.remove_password(user, value)
    return Change(True, f"ACL SETUSER {user} <(old): the old password is valid nowhere")

"""``apply: mariadb`` for rotate: a MariaDB account rotated with alternating users.

MariaDB keeps one password per account (no dual password), so overlap moves the consumers
between two accounts with the same grants: the inactive one gets the new password (sent only
as its mysql_native_password hash) and ``ACCOUNT UNLOCK``, the consumers move to it, and the
account they left gets ``ACCOUNT LOCK``.  With one ``user`` the strategy is restart: the new
hash replaces the old one.

This module only declares the method (read by rotate when a chain names ``mariadb``); the
driver is imported when a run opens a session (:mod:`.method`).
"""

from __future__ import annotations

from rotate.providers import MethodSpec

SPEC = MethodSpec(
    name="mariadb",
    protocol="mysql",
    factory="rotate_provider_mariadb.method:MariaDbMethod",
    default_port=3306,
    default_admin_user="root",
    package="rotate-provider-mariadb",
    fields={"host": {"type": "string", "minLength": 1, "maxLength": 255,
                     "description": "the host part of the accounts ('%' by default)"}},
    alternating_users=True,
    one_value="a MariaDB account holds one password at a time",
)

"""The plug-in against a real MariaDB, through rotate's public surface only: installed with
pip, ``apply: mariadb`` is a method rotate loads from the entry point; every operation of the
ProviderMethod contract is checked from outside (fresh logins) and repeated to prove it is
idempotent; the server's general log never sees a password."""

from __future__ import annotations

import secrets
import socket
import textwrap
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from mariadb_server import ADMIN, ADMIN_PASSWORD, MariaDb, free_port

from rotate.chain.loader import load_chain
from rotate.chain.model import (
    AdminAuth,
    ProviderApply,
    ProviderConnection,
    ServicePortRef,
)
from rotate.clients.seams import Endpoint
from rotate.core.errors import NotFoundError, PermanentError, TemporaryError
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from rotate.core.strategy import Strategy
from rotate.providers import Accounts, Link, Target, method_of


class Journal:
    def __init__(self) -> None:
        self.facts: dict[str, Any] = {}

    @property
    def prior(self) -> Mapping[str, Any]:
        return self.facts

    def record(self, **data: Any) -> None:
        self.facts.update(data)


def unique(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(3)}"


def pw() -> Secret:
    return Secret(secrets.token_urlsafe(24))


def _applied(users: tuple[str, str] | None, user: str | None = None) -> ProviderApply:
    return ProviderApply(
        ObjectRef("StatefulSet", "db", "mariadb"), "mariadb",
        ProviderConnection("mysql", ServicePortRef("db", "mariadb", 3306),
                           options={"host": "%"}),
        user=user, users=users, username_key="username" if users else None,
        admin=AdminAuth(ADMIN))


def _link(db: MariaDb, applied: ProviderApply) -> Link:
    assert applied.connection is not None
    return Link(Endpoint(db.host, db.port), applied.connection, connector=None)  # type: ignore[arg-type]


def test_pip_install_makes_apply_mariadb_available(tmp_path: Path) -> None:
    chain = tmp_path / "rotate.yaml"
    chain.write_text(textwrap.dedent("""\
        apiVersion: rotate/v1
        kind: Chain
        backend: {kvMount: secret, auth: {method: token}}
        cluster: {lockNamespace: rotate-system}
        configCenter: {urlEnv: CONFIG_CENTER_URL, tokenEnv: CONFIG_CENTER_TOKEN}
        credentials:
          shop-db:
            backend: {path: infra/mariadb, key: password}
            generate: {length: 32}
            externalSecret: {namespace: db, name: mariadb-app}
            secret: {namespace: db, name: mariadb-app, key: password}
            providers:
              - kind: StatefulSet
                namespace: db
                name: mariadb
                apply: mariadb
                users: [app_a, app_b]
                usernameKey: username
                host: "%"
                admin:
                  user: rotator
                  secretKey: {namespace: db, name: mariadb-admin, key: password}
        """))
    cred = load_chain(chain).credentials["shop-db"]
    applied = cred.applies[0]
    assert applied.connection is not None
    assert (applied.connection.protocol, applied.connection.service.port) == ("mysql", 3306)
    assert applied.connection.options == {"host": "%"}
    assert cred.strategy == Strategy.overlap  # alternating users hold two values
    assert "users" in cred.strategy_reason
    assert "ACCOUNT UNLOCK" in method_of("mariadb").describe_apply(applied, overlap=True)


def test_alternating_users_rotate_retire_and_roll_back(mariadb: MariaDb) -> None:
    a, b, old, new = unique("app_a"), unique("app_b"), pw(), pw()
    mariadb.account(a, old.reveal())
    mariadb.account(b, pw().reveal(), locked=True)
    method = method_of("mariadb")
    applied = _applied((a, b))
    link = _link(mariadb, applied)
    probe = method.open_probe(link)
    target = Target(applied, Accounts(new=b, old=a), old, new, "overlap")
    admin = method.open_admin(link, ADMIN, Secret(ADMIN_PASSWORD))
    try:
        assert a in method.preflight(admin, probe, Target(applied, Accounts(b, a), old, old))
        journal = Journal()
        assert method.apply(admin, probe, target, journal).changed
        assert journal.facts == {"account": b, "was_locked": True}
        assert probe.accepts(b, new) and probe.accepts(a, old)  # both valid: overlap
        assert not method.apply(admin, probe, target, journal).changed  # resume repeats it
        assert method.retire(admin, probe, target).changed
        assert not probe.accepts(a, old) and probe.accepts(b, new)
        assert not method.retire(admin, probe, target).changed
        # rollback: the old account again (it kept its hash), then the new one locked
        assert method.restore(admin, probe, target).changed
        assert probe.accepts(a, old) and probe.accepts(b, new)
        assert not method.restore(admin, probe, target).changed
        assert method.retire_replaced(admin, probe, target).changed
        assert probe.accepts(a, old) and not probe.accepts(b, new)
    finally:
        admin.close()
    log = mariadb.log_text()
    assert "IDENTIFIED BY PASSWORD '*" in log  # the log records statements: only hashes
    assert new.reveal() not in log and old.reveal() not in log


def test_one_user_is_a_hard_cut_and_restore_puts_the_old_hash_back(mariadb: MariaDb) -> None:
    user, old, new = unique("solo"), pw(), pw()
    mariadb.account(user, old.reveal())
    method = method_of("mariadb")
    applied = _applied(None, user)
    link = _link(mariadb, applied)
    probe = method.open_probe(link)
    target = Target(applied, Accounts(user, user), old, new, "restart")
    admin = method.open_admin(link, ADMIN, Secret(ADMIN_PASSWORD))
    try:
        assert method.apply(admin, probe, target, Journal()).changed
        assert probe.accepts(user, new) and not probe.accepts(user, old)
        assert not method.retires_replaced(applied)
        assert method.restore(admin, probe, target).changed
        assert probe.accepts(user, old) and not probe.accepts(user, new)
    finally:
        admin.close()
    assert new.reveal() not in mariadb.log_text()


def test_preflight_refuses_missing_accounts_and_different_grants(mariadb: MariaDb) -> None:
    a, b, current = unique("app_a"), unique("app_b"), pw()
    mariadb.account(a, current.reveal())
    method = method_of("mariadb")
    applied = _applied((a, b))
    link = _link(mariadb, applied)
    probe = method.open_probe(link)
    check = Target(applied, Accounts(b, a), current, current)
    admin = method.open_admin(link, ADMIN, Secret(ADMIN_PASSWORD))
    try:
        with pytest.raises(NotFoundError, match="does not exist"):
            method.preflight(admin, probe, check)
        mariadb.account(b, pw().reveal(), locked=True, grant="INSERT ON shop.*")
        with pytest.raises(PermanentError, match="same grants"):
            method.preflight(admin, probe, check)
    finally:
        admin.close()


def test_an_unreachable_server_is_temporary() -> None:
    probe = method_of("mariadb").open_probe(_link(
        MariaDb("127.0.0.1", free_port(), Path("/nonexistent")), _applied(None, "x")))
    with pytest.raises(TemporaryError):
        probe.accepts("x", pw())


def test_a_hung_server_is_temporary_within_the_timeout() -> None:
    """A server that accepts the connection and never greets (frozen, not refusing): the
    login gives up after its timeout instead of blocking the step past its deadline."""
    from rotate_provider_mariadb.client import MariaDbProbe

    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(1)  # the kernel completes the handshake; nobody ever answers
        probe = MariaDbProbe(Endpoint("127.0.0.1", hung.getsockname()[1]), timeout=1)
        began = time.monotonic()
        with pytest.raises(TemporaryError):
            probe.accepts("x", pw())
        assert time.monotonic() - began < 10

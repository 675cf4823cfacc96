"""The shape of a provider "world" (tests/providers/conftest.py builds them): one Redis or
PostgreSQL server, real or fake, with the same set-up verbs, so the contract and stage tests
run the same checks against both."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from rotate.clients.provider_seams import AuthProbe, PostgresAdmin, RedisAclAdmin
from rotate.core.secret import Secret

ADMIN_PW = "admin-password-0123456789"


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@dataclass
class RedisWorld:
    kind: str
    admin: RedisAclAdmin
    probe: AuthProbe
    create_user: Callable[[str, list[str]], None]
    connect: Callable[[str, Secret], RedisAclAdmin]


@dataclass
class PgWorld:
    kind: str
    admin: PostgresAdmin
    probe: AuthProbe
    create_role: Callable[..., None]
    statements: Callable[[], str]
    connect: Callable[[str, Secret], PostgresAdmin]

"""The real :class:`rotate.clients.provider_seams.ProviderConnector`: redis-py and psycopg adapters.

The engine's wiring hands this to the provider steps; tests hand a fake
(``tests/fakes_providers.py``).  One place knows both drivers' constructors, so stages never
import them.

Each driver is imported when its provider is first used: a Dragonfly rotation never pays for
psycopg's import (~0.1–0.2 s of start-up), a PostgreSQL one never for redis-py's.
"""

from __future__ import annotations

from rotate.clients.provider_seams import AuthProbe, PostgresAdmin, RedisAclAdmin
from rotate.clients.seams import Endpoint
from rotate.core.secret import Secret


class Connector:
    def __init__(self, *, timeout: float = 5.0) -> None:
        self._timeout = timeout

    def redis_admin(self, endpoint: Endpoint, user: str, password: Secret, *,
                    tls: bool) -> RedisAclAdmin:
        from rotate.clients.redis_acl import RedisAcl

        return RedisAcl.connect(endpoint, user, password, tls=tls, timeout=self._timeout)

    def postgres_admin(self, endpoint: Endpoint, user: str, password: Secret, *,
                       database: str, sslmode: str) -> PostgresAdmin:
        from rotate.clients.postgres import PostgresRoles

        return PostgresRoles.connect(endpoint, user, password, database=database,
                                     sslmode=sslmode, timeout=self._timeout)

    def redis_probe(self, endpoint: Endpoint, *, tls: bool) -> AuthProbe:
        from rotate.clients.redis_acl import RedisAuthProbe

        return RedisAuthProbe(endpoint, tls=tls, timeout=self._timeout)

    def postgres_probe(self, endpoint: Endpoint, *, database: str,
                       sslmode: str) -> AuthProbe:
        from rotate.clients.postgres import PostgresLoginProbe

        return PostgresLoginProbe(endpoint, database=database, sslmode=sslmode,
                                  timeout=self._timeout)

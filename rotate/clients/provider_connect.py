"""The real :class:`rotate.clients.seams.ProviderConnector`: redis-py and psycopg adapters.

The engine's wiring hands this to the provider steps; tests hand a fake
(``tests/fakes_providers.py``).  One place knows both drivers' constructors, so stages never
import them.
"""

from __future__ import annotations

from rotate.clients.postgres import PostgresLoginProbe, PostgresRoles
from rotate.clients.redis_acl import RedisAcl, RedisAuthProbe
from rotate.clients.seams import AuthProbe, Endpoint, PostgresAdmin, RedisAclAdmin
from rotate.core.secret import Secret


class Connector:
    def __init__(self, *, timeout: float = 5.0) -> None:
        self._timeout = timeout

    def redis_admin(self, endpoint: Endpoint, user: str, password: Secret, *,
                    tls: bool) -> RedisAclAdmin:
        return RedisAcl.connect(endpoint, user, password, tls=tls, timeout=self._timeout)

    def postgres_admin(self, endpoint: Endpoint, user: str, password: Secret, *,
                       database: str, sslmode: str) -> PostgresAdmin:
        return PostgresRoles.connect(endpoint, user, password, database=database,
                                     sslmode=sslmode, timeout=self._timeout)

    def redis_probe(self, endpoint: Endpoint, *, tls: bool) -> AuthProbe:
        return RedisAuthProbe(endpoint, tls=tls, timeout=self._timeout)

    def postgres_probe(self, endpoint: Endpoint, *, database: str,
                       sslmode: str) -> AuthProbe:
        return PostgresLoginProbe(endpoint, database=database, sslmode=sslmode,
                                  timeout=self._timeout)

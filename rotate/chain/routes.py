"""How rotate reaches a provider it connects to: the one rule (docs/chain-file.md
"Reaching a provider").

* ``address`` — the provider's ``addressEnv`` is set in the environment: that host:port.
* ``direct`` — rotate runs inside the cluster (``KUBERNETES_SERVICE_HOST`` is set: the kubelet
  sets it in every container), where the Service's ClusterIP is routable.
* ``port-forward`` — anywhere else (a laptop, CI): the ClusterIP and pod IPs are not
  routable, the API server is; rotate relays through its ``pods/portforward``, to a ready pod
  behind the Service, as ``kubectl port-forward`` does.

``ROTATE_PROVIDER_ROUTE=direct`` or ``port-forward`` overrides the in-or-out decision (a
laptop on a VPN that routes the cluster's Service network; a pod whose NetworkPolicy
forbids the connection); ``addressEnv`` still wins.  Pure: it reads only the mapping it is
given, so preflight, doctor and the steps decide alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from rotate.chain.model import ProviderConnection

ROUTE_ENV = "ROTATE_PROVIDER_ROUTE"
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"
ROUTES = ("direct", "port-forward")
Route = Literal["address", "direct", "port-forward"]


class BadRoute(ValueError):
    """``ROTATE_PROVIDER_ROUTE`` holds something else than :data:`ROUTES`."""


def provider_route(connection: ProviderConnection, environ: Mapping[str, str]) -> Route:
    if connection.address_env and environ.get(connection.address_env):
        return "address"
    forced = environ.get(ROUTE_ENV, "").strip()
    if forced == "direct":
        return "direct"
    if forced == "port-forward":
        return "port-forward"
    if forced:
        raise BadRoute(f"{ROUTE_ENV} must be one of {', '.join(ROUTES)} (or unset)")
    return "direct" if environ.get(IN_CLUSTER_ENV) else "port-forward"


def may_port_forward(connection: ProviderConnection, environ: Mapping[str, str] | None) -> bool:
    """Whether a run may reach the provider through port-forward.  ``environ`` None: the
    place the run happens is not known (``rotate rbac`` prints grants for an identity that
    may run from a laptop): True unless the chain gives an ``addressEnv``."""
    if environ is None:
        return not connection.address_env
    try:
        return provider_route(connection, environ) == "port-forward"
    except BadRoute:
        return True  # checked with the permission; the route itself fails preflight

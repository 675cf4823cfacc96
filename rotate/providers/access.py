"""How a provider step reaches a provider: its endpoint, the admin passwords, the sessions.

One :class:`Reach` per attempt: the method chosen once (:mod:`rotate.providers.registry`), the
Service read once (:func:`resolve_endpoint`), the probe opened on that endpoint, and admin
sessions opened on the same endpoint with the first accepted candidate password.  Nothing
here changes a provider: it reads the Service, the admin Secret, and logs in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from rotate.chain.model import Generate, ProviderApply, ProviderConnection, SecretKeyRef
from rotate.chain.routes import ROUTE_ENV, BadRoute, provider_route
from rotate.clients.provider_seams import AuthProbe, ProviderConnector
from rotate.clients.seams import Endpoint, Kube
from rotate.core.errors import ForbiddenError, NotFoundError, PermanentError, RejectedError
from rotate.core.secret import Secret
from rotate.core.waiting import CancelToken, Deadline
from rotate.providers.method import Accounts, InCluster, Link, ProviderMethod, Target
from rotate.providers.registry import method_for

T = TypeVar("T")


def resolve_endpoint(kube: Kube, connection: ProviderConnection,
                     environ: Mapping[str, str]) -> Endpoint:
    """Where this attempt connects (rotate.chain.routes): ``addressEnv`` (host:port) when set
    in the environment; inside the cluster the Service's ClusterIP and port (a headless
    Service: its first ready endpoint address); outside it a loopback port relaying through
    the API server's port-forward to a ready pod behind the Service."""
    try:
        route = provider_route(connection, environ)
    except BadRoute as exc:
        raise RejectedError("rotate", f"read {ROUTE_ENV}", str(exc)) from None
    if route == "address":
        override = environ.get(connection.address_env or "", "")
        host, _, port = override.rpartition(":")
        if not host or not port.isdigit():
            raise RejectedError("rotate", f"read {connection.address_env}",
                                "must be host:port")
        return Endpoint(host.strip("[]"), int(port))
    svc_ref = connection.service
    svc = kube.get("Service", svc_ref.namespace, svc_ref.name)
    spec = svc.get("spec", {})
    entry = _service_port(spec.get("ports", []), svc_ref.port, str(svc_ref))
    if route == "port-forward":
        pod, number = backing_pod(kube, connection, entry)
        return kube.port_forward(svc_ref.namespace, pod, number)
    ip = spec.get("clusterIP")
    if ip and ip != "None":
        return Endpoint(str(ip), int(entry["port"]))
    eps = kube.get("Endpoints", svc_ref.namespace, svc_ref.name)
    target = entry.get("targetPort", entry["port"])
    number = int(target) if str(target).isdigit() else int(entry["port"])
    for subset in eps.get("subsets", []) or []:
        for address in subset.get("addresses", []) or []:
            return Endpoint(str(address["ip"]), number)
    raise NotFoundError("kubernetes", f"service {svc_ref}", "no ready endpoint")


def backing_pod(kube: Kube, connection: ProviderConnection,
                entry: Mapping[str, Any]) -> tuple[str, int]:
    """A ready pod behind the Service and the pod's port for the Service port ``entry``,
    from the Service's Endpoints (the endpoints controller resolved the selector, readiness
    and a named ``targetPort`` already).  NotFoundError without a ready pod (retried until
    the step's deadline: a restarting provider comes back); PermanentError for endpoints
    that name no pod (a Service without a selector), which port-forward cannot reach."""
    svc_ref = connection.service
    eps = kube.get("Endpoints", svc_ref.namespace, svc_ref.name)
    target = entry.get("targetPort", entry["port"])
    for subset in eps.get("subsets", []) or []:
        ports = subset.get("ports", []) or []
        number = next((int(p["port"]) for p in ports
                       if entry.get("name") and p.get("name") == entry.get("name")), None)
        if number is None:
            number = int(ports[0]["port"]) if len(ports) == 1 else (
                int(target) if str(target).isdigit() else None)
        for address in subset.get("addresses", []) or []:
            ref = address.get("targetRef") or {}
            if ref.get("kind") != "Pod" or not ref.get("name") or number is None:
                raise PermanentError(
                    "kubernetes", f"port-forward to service {svc_ref}",
                    "its endpoints name no pod (a Service without a selector): rotate "
                    "cannot port-forward to it from outside the cluster; set the provider's "
                    "addressEnv, or run rotate inside the cluster")
            return str(ref["name"]), number
    raise NotFoundError("kubernetes", f"service {svc_ref}",
                        "no ready pod to port-forward to")


def _service_port(ports: Sequence[Mapping[str, Any]], wanted: int | str,
                  where: str) -> Mapping[str, Any]:
    for p in ports:
        if wanted in (p.get("name"), p.get("port")):
            return p
    raise NotFoundError("kubernetes", f"service {where}", f"no port {wanted!r}")


def admin_candidates(kube: Kube, applied: ProviderApply, credential_secret: SecretKeyRef,
                     old: Secret, new: Secret) -> tuple[Secret, ...]:
    """The admin passwords to try, in order.  The credential itself: the old value, then the
    new one (after the change, and on resume, only the new one works).  Otherwise the named
    Secret key; NotFoundError when it is missing (preflight: exit 3)."""
    admin = applied.admin
    if admin is None:
        raise PermanentError(applied.method, f"admin of {applied.provider}",
                             "apply: rollout has no admin connection")
    if applied.admin_is_credential(credential_secret):
        return (old, new)
    ref = admin.password
    assert ref is not None  # admin_is_credential covers None
    value = kube.read_secret_key(ref.namespace, ref.name, ref.key)
    if value is None:
        raise NotFoundError("kubernetes", f"admin secret {ref}", "key absent")
    return (value,)


def connect_first(connect: Callable[[Secret], T], candidates: Sequence[Secret]) -> T:
    """The first connection whose password is accepted; the last ForbiddenError otherwise."""
    refused: ForbiddenError | None = None
    for password in candidates:
        try:
            return connect(password)
        except ForbiddenError as exc:
            refused = exc
    assert refused is not None, "no candidate password"
    raise refused


@dataclass(frozen=True)
class Reach:
    """One attempt's way to one provider: its method, the link (the Service read once) and
    the probe opened on it.  For a rollout provider with ``probe`` the method is the one
    speaking that protocol, used for the probe and its ``restart_hint`` only."""

    applied: ProviderApply
    method: ProviderMethod[Any]
    link: Link
    probe: AuthProbe

    @property
    def protocol(self) -> str:
        return self.link.connection.protocol if self.link.connection else self.applied.method

    @contextmanager
    def admin(self, candidates: Sequence[Secret]) -> Iterator[Any]:
        """An admin session on the link (the first accepted candidate), closed at the end."""
        auth = self.applied.admin
        if auth is None:
            raise PermanentError(self.applied.method, f"admin of {self.applied.provider}",
                                 "apply: rollout has no admin connection")
        session = connect_first(lambda pw: self.method.open_admin(self.link, auth.user, pw),
                                candidates)
        try:
            yield session
        finally:
            session.close()


def reach(connector: ProviderConnector, kube: Kube, applied: ProviderApply,
          environ: Mapping[str, str], *, run_id: str = "", credential: str = "",
          deadline: Deadline | None = None, cancel: CancelToken | None = None) -> Reach:
    """The attempt's :class:`Reach`; PermanentError for a provider without a protocol.  A
    live method without a wire protocol (``apply: job``) acts from inside the cluster: its
    link has :class:`InCluster` (the run id names the objects it makes) instead of an
    endpoint."""
    method = method_for(applied)
    if applied.connection is None:
        link = Link(None, None, connector,
                    InCluster(kube, run_id, credential, deadline, applied, cancel))
    else:
        link = Link(resolve_endpoint(kube, applied.connection, environ), applied.connection,
                    connector)
    return Reach(applied, method, link, method.open_probe(link))


def preflight(connector: ProviderConnector, kube: Kube, applied: ProviderApply,
              credential_secret: SecretKeyRef, accounts: Accounts, current: Secret,
              environ: Mapping[str, str], generate: Generate | None = None) -> str:
    """Observe only (exit 3 on any ClientError, nothing changed): the method takes the values
    the credential generates, the admin Secret exists, the admin authenticates (with the
    credential itself: the *current* value), and the method's own preconditions hold."""
    problem = method_for(applied).values.problem(generate)
    if problem is not None:
        raise PermanentError(applied.method, f"values of {applied.provider}", problem)
    candidates = admin_candidates(kube, applied, credential_secret, current, current)[:1]
    found = reach(connector, kube, applied, environ, run_id="preflight",
                  credential=credential_secret.name)
    with found.admin(candidates) as admin:
        return found.method.preflight(admin, found.probe,
                                      Target(applied, accounts, current, current))

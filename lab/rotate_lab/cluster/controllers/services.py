"""Services: ClusterIPs, Endpoints and in-lab DNS.

- A Service of type ClusterIP/NodePort/LoadBalancer without ``spec.clusterIP`` gets one from
  the lab's address plan (a loopback address of its own); ``clusterIP: None`` (headless) gets
  none.  ``NAME.NS.svc.cluster.local`` is published through ``ctx.resolver`` (DIR/hosts).
- A Service *with* a selector gets an Endpoints object of the same name, rebuilt from the pods
  that match: Ready pods under ``addresses``, the others under ``notReadyAddresses``, each
  port's ``targetPort`` resolved per pod (a named targetPort looks up the container port of
  that name).  A Service *without* a selector keeps whatever Endpoints someone wrote — the
  lab points ``openbao/openbao`` and ``platform/config-center`` at processes outside the
  "cluster" that way, as one does for external services on a real cluster.
- The controller does *not* carry ClusterIP traffic: the lab's kube-proxy, a process of its
  own (:mod:`rotate_lab.kubeproxy`), watches Services and Endpoints through the API server
  and listens on every ``ClusterIP:port``, as kube-proxy does on a real cluster.  Byte
  pumps in this process would compete with the API server and the controllers for one GIL:
  under load every API request would wait behind them.
- :meth:`ServiceController.proxy_target` is the service proxy subresource's resolver
  (``/api/v1/namespaces/NS/services/NAME:PORT/proxy/...``): a Ready endpoint's IP and port, or
  a 503 ``ApiError`` with the API server's wording when there is none.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from typing import TYPE_CHECKING, Any

from rotate_lab.cluster.api.endpoints import ready_addresses
from rotate_lab.cluster.api.selectors import selector_from_spec
from rotate_lab.cluster.api.store import ApiError
from rotate_lab.cluster.controllers.base import Controller, Key, key_of
from rotate_lab.cluster.controllers.replicaset import pod_is_active, pod_is_ready

if TYPE_CHECKING:
    from rotate_lab.cluster.context import LabContext

Obj = dict[str, Any]

_CLUSTER_IP_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")


def _unavailable(message: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", message)


def resolve_target_port(target: Any, pod: Obj) -> int | None:
    if isinstance(target, int) or (isinstance(target, str) and target.isdigit()):
        return int(target)
    for c in (pod.get("spec") or {}).get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("name") == target:
                return int(p["containerPort"])
    return None


def build_subsets(svc: Obj, pods: list[Obj]) -> list[Obj]:
    """Endpoints subsets for the pods selected by ``svc``, grouped by resolved ports."""
    ports = [p for p in (svc.get("spec") or {}).get("ports") or [] if isinstance(p, dict)]
    groups: dict[tuple[tuple[str, int, str], ...], dict[str, list[Obj]]] = {}
    for pod in pods:
        ip = (pod.get("status") or {}).get("podIP")
        if not ip or not pod_is_active(pod):
            continue
        resolved = []
        for p in ports:
            num = resolve_target_port(p.get("targetPort", p.get("port")), pod)
            if num is not None:
                resolved.append((str(p.get("name") or ""), num, str(p.get("protocol") or "TCP")))
        if not resolved:
            continue
        md = pod["metadata"]
        addr = {"ip": ip, "nodeName": "lab", "targetRef": {
            "kind": "Pod", "namespace": md["namespace"], "name": md["name"], "uid": md["uid"]}}
        group = groups.setdefault(tuple(resolved), {"addresses": [], "notReadyAddresses": []})
        group["addresses" if pod_is_ready(pod) else "notReadyAddresses"].append(addr)
    subsets = []
    for key, group in sorted(groups.items()):
        subset: Obj = {}
        for field in ("addresses", "notReadyAddresses"):
            if group[field]:
                subset[field] = sorted(group[field], key=lambda a: str(a["ip"]))
        subset["ports"] = [{**({"name": n} if n else {}), "port": num, "protocol": proto}
                           for n, num, proto in key]
        subsets.append(subset)
    return subsets


class ServiceController(Controller):
    name = "services"
    kinds = ("Service", "Pod", "Endpoints")

    def __init__(self, ctx: LabContext) -> None:
        super().__init__(ctx)
        self._managed: set[tuple[str, str]] = set()  # Endpoints this controller writes
        self._members: dict[str, set[Key]] = {}  # pod uid → Services it was an endpoint of
        self._members_lock = threading.Lock()  # keys_for runs on the store's notifier threads
        self._rr = itertools.count()
        self._rr_lock = threading.Lock()

    def keys_for(self, event_type: str, kind: str, obj: Obj) -> list[Key]:
        if kind == "Service":
            return [key_of(kind, obj)]
        ns = str(obj["metadata"].get("namespace") or "")
        if kind == "Endpoints":
            return [("Service", ns, str(obj["metadata"]["name"]))]
        return self._pod_services(event_type, obj)

    def _pod_services(self, event_type: str, pod: Obj) -> list[Key]:
        """The Services a pod change concerns: those whose selector matches it now, plus those
        it matched before (a relabelled or deleted pod leaves their endpoints) — as the
        endpoints controller's pod→service memberships.  Reconciling only these keeps the
        endpoint update of a rollout from queueing behind every other Service."""
        md = pod["metadata"]
        ns, uid = str(md.get("namespace") or ""), str(md.get("uid") or "")
        labels = md.get("labels") or {}
        services = self.ctx.store.select("Service", ns, lambda s: bool(
            (sel := (s.get("spec") or {}).get("selector"))
            and selector_from_spec({"matchLabels": sel}).matches(labels)))
        now = {key_of("Service", s) for s in services}
        with self._members_lock:
            before = self._members.pop(uid, set())
            if event_type != "DELETED":
                self._members[uid] = now
        return sorted(now | before)

    def resync_keys(self) -> list[Key]:
        keys = set(self.stored_keys("Service"))
        keys.update(("Service", ns, name) for ns, name in self._managed)
        return sorted(keys)

    def reconcile(self, key: Key) -> float | None:
        _, ns, name = key
        store = self.ctx.store
        try:
            svc: Obj | None = store.get("Service", ns, name)
        except ApiError as exc:
            if exc.code != 404:
                raise
            svc = None
        if svc is None:
            self.ctx.resolver.set(ns, name, None)
            if (ns, name) in self._managed:
                self._managed.discard((ns, name))
                with contextlib.suppress(ApiError):
                    store.delete("Endpoints", ns, name)
            return None
        spec = svc.get("spec") or {}
        ip = spec.get("clusterIP")
        if not ip and spec.get("type", "ClusterIP") in _CLUSTER_IP_TYPES:
            ip = self.ctx.network.cluster_ip()

            def assign(obj: Obj) -> None:
                obj["spec"].update(clusterIP=ip, clusterIPs=[ip], ipFamilies=["IPv4"],
                                   ipFamilyPolicy="SingleStack")

            svc = store.mutate("Service", ns, name, assign)
            spec = svc["spec"]
        has_ip = bool(ip) and ip != "None"
        self.ctx.resolver.set(ns, name, ip if has_ip else None)
        if spec.get("selector"):
            self._sync_endpoints(svc)
        return None

    def _sync_endpoints(self, svc: Obj) -> None:
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        selector = selector_from_spec({"matchLabels": svc["spec"]["selector"]})
        subsets = build_subsets(svc, self.ctx.store.select(
            "Pod", ns, lambda p: selector.matches(p["metadata"].get("labels") or {})))
        labels = dict(svc["metadata"].get("labels") or {})
        self._managed.add((ns, name))
        try:
            current = self.ctx.store.get("Endpoints", ns, name)
        except ApiError as exc:
            if exc.code != 404:
                raise
            body: Obj = {"apiVersion": "v1", "kind": "Endpoints",
                         "metadata": {"name": name, "namespace": ns, "labels": labels}}
            if subsets:
                body["subsets"] = subsets
            self.ctx.store.create("Endpoints", body)
            return
        if (current.get("subsets") or []) == subsets and \
                (current["metadata"].get("labels") or {}) == labels:
            return

        def put(obj: Obj) -> None:
            obj["metadata"]["labels"] = labels
            if subsets:
                obj["subsets"] = subsets
            else:
                obj.pop("subsets", None)

        self.ctx.store.mutate("Endpoints", ns, name, put)

    # -- endpoint selection ---------------------------------------------------------------

    def ready_endpoints(self, ns: str, name: str, port_name: str, port: int
                        ) -> list[tuple[str, int]]:
        try:
            ep = self.ctx.store.get("Endpoints", ns, name)
        except ApiError:
            return []
        return ready_addresses(ep, port_name)

    def pick(self, ns: str, name: str, port_name: str, port: int) -> list[tuple[str, int]]:
        """Ready endpoints in round-robin order (the first is the choice, the rest fallbacks)."""
        eps = self.ready_endpoints(ns, name, port_name, port)
        if not eps:
            return []
        with self._rr_lock:
            start = next(self._rr) % len(eps)
        return eps[start:] + eps[:start]

    def proxy_target(self, namespace: str, name: str, port: str) -> tuple[str, int]:
        """(pod IP, target port) of a Ready endpoint for ``NAME:PORT`` (name or number).

        Raises ApiError: 404 when the Service does not exist, 503 ServiceUnavailable when the
        port is unknown or no endpoint is Ready (the API server's own messages)."""
        svc = self.ctx.store.get("Service", namespace, name)
        ports = [p for p in (svc.get("spec") or {}).get("ports") or [] if isinstance(p, dict)]
        if port:
            chosen = next((p for p in ports if str(p.get("name") or "") == port
                           or str(p.get("port")) == port), None)
        else:
            chosen = ports[0] if len(ports) == 1 else None
        if chosen is None:
            raise _unavailable(f'no service port "{port}" found for service "{name}"')
        eps = self.pick(namespace, name, str(chosen.get("name") or ""), int(chosen["port"]))
        if not eps:
            raise _unavailable(f'no endpoints available for service "{name}"')
        return eps[0]

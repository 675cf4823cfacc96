"""Services: ClusterIPs, Endpoints, in-lab DNS and a TCP forwarder per Service port.

- A Service of type ClusterIP/NodePort/LoadBalancer without ``spec.clusterIP`` gets one from
  the lab's address plan (a loopback address of its own); ``clusterIP: None`` (headless) gets
  none.  ``NAME.NS.svc.cluster.local`` is published through ``ctx.resolver`` (DIR/hosts).
- A Service *with* a selector gets an Endpoints object of the same name, rebuilt from the pods
  that match: Ready pods under ``addresses``, the others under ``notReadyAddresses``, each
  port's ``targetPort`` resolved per pod (a named targetPort looks up the container port of
  that name).  A Service *without* a selector keeps whatever Endpoints someone wrote — the
  lab points ``openbao/openbao`` and ``platform/config-center`` at processes outside the
  "cluster" that way, as one does for external services on a real cluster.
- For each TCP port the controller listens on ``ClusterIP:port`` and passes every accepted
  connection to a Ready endpoint, round-robin, reading the Endpoints at connection time (so
  a rollout is visible to the next connection, never to an established one — like
  kube-proxy's conntrack behaviour).
- :meth:`ServiceController.proxy_target` is the service proxy subresource's resolver
  (``/api/v1/namespaces/NS/services/NAME:PORT/proxy/...``): a Ready endpoint's IP and port, or
  a 503 ``ApiError`` with the API server's wording when there is none.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from typing import TYPE_CHECKING, Any

from rotate_lab.kube.controllers.base import Controller, Key, key_of
from rotate_lab.kube.controllers.replicaset import pod_is_active, pod_is_ready
from rotate_lab.kube.selectors import selector_from_spec
from rotate_lab.kube.store import ApiError

if TYPE_CHECKING:
    from rotate_lab.context import LabContext

Obj = dict[str, Any]

_CLUSTER_IP_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
CONNECT_TIMEOUT = 2.0


def _unavailable(message: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", message)


class Forwarder:
    """Listens on one ClusterIP:port and pipes each connection to a picked endpoint."""

    def __init__(self, owner: ServiceController, ns: str, name: str, port: Obj, ip: str) -> None:
        self.owner, self.ns, self.name = owner, ns, name
        self.port_name = str(port.get("name") or "")
        self.port = int(port["port"])
        self.ip = ip
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((ip, self.port))
        self.sock.listen(128)
        self.sock.settimeout(0.5)
        self._closed = threading.Event()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept_loop, daemon=True,
                                        name=f"svc-{ns}-{name}-{self.port}")
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        for ip, port in self.owner.pick(self.ns, self.name, self.port_name, self.port):
            try:
                upstream = socket.create_connection((ip, port), timeout=CONNECT_TIMEOUT)
                break
            except OSError:
                continue
        if upstream is None or self._closed.is_set():
            client.close()
            if upstream is not None:
                upstream.close()
            return
        upstream.settimeout(None)
        client.settimeout(None)
        with self._lock:
            self._conns.update((client, upstream))
        other = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
        other.start()
        self._pump(client, upstream)
        other.join()
        with self._lock:
            self._conns.difference_update((client, upstream))
        client.close()
        upstream.close()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=2)


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
        self._bind_failed: set[tuple[str, int]] = set()
        self.forwarders: dict[tuple[str, str], dict[tuple[str, int], Forwarder]] = {}
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
        services, _ = self.ctx.store.list("Service", ns)
        now = {key_of("Service", s) for s in services
               if (sel := (s.get("spec") or {}).get("selector"))
               and selector_from_spec({"matchLabels": sel}).matches(labels)}
        with self._members_lock:
            before = self._members.pop(uid, set())
            if event_type != "DELETED":
                self._members[uid] = now
        return sorted(now | before)

    def resync_keys(self) -> list[Key]:
        items, _ = self.ctx.store.list("Service")
        keys = {key_of("Service", o) for o in items}
        keys.update(("Service", ns, name) for ns, name in self.forwarders)
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
            self._close(ns, name)
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
        self._sync_forwarders(svc, ip if has_ip else None)
        return None

    def _sync_endpoints(self, svc: Obj) -> None:
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        selector = selector_from_spec({"matchLabels": svc["spec"]["selector"]})
        pods, _ = self.ctx.store.list("Pod", ns)
        subsets = build_subsets(svc, [p for p in pods
                                      if selector.matches(p["metadata"].get("labels") or {})])
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

    def _sync_forwarders(self, svc: Obj, ip: str | None) -> None:
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        want: dict[tuple[str, int], Obj] = {}
        if ip:
            for p in svc["spec"].get("ports") or []:
                if str(p.get("protocol") or "TCP") == "TCP" and "port" in p:
                    want[(ip, int(p["port"]))] = p
        have = self.forwarders.setdefault((ns, name), {})
        for fkey in [k for k, f in have.items()
                     if k not in want or f.port_name != str(want[k].get("name") or "")]:
            have.pop(fkey).close()
        for fkey, port in want.items():
            if fkey in have:
                continue
            try:
                have[fkey] = Forwarder(self, ns, name, port, fkey[0])
                self._bind_failed.discard(fkey)
            except OSError as exc:
                if fkey not in self._bind_failed:  # retried on every event: say it once
                    self._bind_failed.add(fkey)
                    self.log.error("service %s/%s: cannot listen on %s:%s (%s)", ns, name,
                                   fkey[0], fkey[1], exc.strerror)
        if not have:
            self.forwarders.pop((ns, name), None)

    def _close(self, ns: str, name: str) -> None:
        for f in self.forwarders.pop((ns, name), {}).values():
            f.close()

    def on_stop(self) -> None:
        for ns, name in list(self.forwarders):
            self._close(ns, name)

    # -- endpoint selection ---------------------------------------------------------------

    def ready_endpoints(self, ns: str, name: str, port_name: str, port: int
                        ) -> list[tuple[str, int]]:
        try:
            ep = self.ctx.store.get("Endpoints", ns, name)
        except ApiError:
            return []
        out: list[tuple[str, int]] = []
        for subset in ep.get("subsets") or []:
            ports = subset.get("ports") or []
            match = next((p for p in ports if str(p.get("name") or "") == port_name), None)
            if match is None and len(ports) == 1:
                match = ports[0]
            if match is None:
                continue
            out += [(str(a["ip"]), int(match["port"])) for a in subset.get("addresses") or []
                    if a.get("ip")]
        return out

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

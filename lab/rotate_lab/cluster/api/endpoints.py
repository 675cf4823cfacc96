"""Reading an Endpoints object the way kube-proxy and the service proxy do.

Pure functions over the object, shared by the API server's service proxy subresource
(:class:`rotate_lab.cluster.controllers.services.ServiceController`) and the lab's kube-proxy
process (:mod:`rotate_lab.kubeproxy`), so that both route a Service port to the same set of
Ready endpoints.  Only ``addresses`` count: ``notReadyAddresses`` never receive traffic.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def ready_addresses(endpoints: Obj | None, port_name: str) -> list[tuple[str, int]]:
    """(ip, port) of every Ready address serving the Service port named ``port_name``.

    A subset whose ports include that name serves it; a subset with a single port serves an
    unnamed (single-port) Service whatever the name, as Kubernetes allows the name to be
    omitted then.  Order is the object's (the controller sorts addresses by IP)."""
    out: list[tuple[str, int]] = []
    for subset in (endpoints or {}).get("subsets") or []:
        ports = subset.get("ports") or []
        match = next((p for p in ports if str(p.get("name") or "") == port_name), None)
        if match is None and len(ports) == 1:
            match = ports[0]
        if match is None:
            continue
        out += [(str(a["ip"]), int(match["port"])) for a in subset.get("addresses") or []
                if a.get("ip")]
    return out

"""How the plan names the objects its steps act on: pure functions of the chain file."""

from __future__ import annotations

from rotate.chain.model import Chain, Credential, Service
from rotate.core.refs import WORKLOAD_KINDS, ObjectRef

_BY_LOWER = {k.lower(): k for k in WORKLOAD_KINDS}


def backend_target(chain: Chain, credential: Credential) -> str:
    return f"{chain.backend.kv_mount}/{credential.backend.path}#{credential.backend.key}"


def workload_ref(service: Service) -> ObjectRef:
    return ObjectRef(service.workload.kind, service.namespace, service.workload.name)


def readyz_target(service: Service) -> str:
    cfg = service.readyz
    if cfg.url:
        return cfg.url
    return f"{service.namespace}/{cfg.service or service.name}:{cfg.port}{cfg.path}"


def parse_workload(subject: str) -> ObjectRef:
    """``deployment/ns/name`` (str(ObjectRef), a provider step's subject) back to an
    ObjectRef with the proper kind."""
    kind, ns, name = subject.split("/", 2)
    return ObjectRef(_BY_LOWER.get(kind, kind), ns, name)

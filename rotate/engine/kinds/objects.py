"""The Kubernetes objects steps act on, as the kinds name them in ``StepKind.objects``: a
step's events go there (rotate.engine.events), and ``kubectl describe`` finds them there.

The backend's writes are told on the ExternalSecret, which reads that path; a provider's
rollout or live change on its workload; a consumer's document, rollout, token revocation and
readyz on its workload; a minted token on the Secret that holds it.
"""

from __future__ import annotations

from rotate.core.refs import WORKLOAD_KINDS, ObjectRef
from rotate.engine.kinds.base import Run
from rotate.engine.targets import workload_ref

_BY_LOWER = {k.lower(): k for k in WORKLOAD_KINDS}


def external_secret(run: Run) -> list[ObjectRef]:
    es = run.credential.external_secret
    return [ObjectRef("ExternalSecret", es.namespace, es.name)]


def target_secret(run: Run) -> list[ObjectRef]:
    sec = run.credential.secret
    return [ObjectRef("Secret", sec.namespace, sec.name)]


def provider_workload(subject: str) -> list[ObjectRef]:
    """A provider step's subject (``deployment/ns/name``, str of its ref) as the workload it
    names; none when the subject is no workload (a journal this version cannot read so)."""
    parts = subject.split("/")
    if len(parts) != 3 or parts[0] not in _BY_LOWER:
        return []
    return [ObjectRef(_BY_LOWER[parts[0]], parts[1], parts[2])]


def consumer_workload(run: Run, subject: str) -> list[ObjectRef]:
    svc = run.chain.services.get(subject)
    return [workload_ref(svc)] if svc is not None else []


def token_secret(run: Run, subject: str) -> list[ObjectRef]:
    svc = run.chain.services.get(subject)
    if svc is None:
        return []
    return [ObjectRef("Secret", svc.token.namespace, svc.token.name)]

"""The plan: chain file + what preflight observed → the ordered steps (chain.md). Pure.

No I/O here, so the plan printed by ``--dry-run`` is exactly what ``--confirm`` executes,
and golden tests need no system around.  One step per object for steps that act on several
objects (a ``consumer.restart`` per consumer), each with a concrete ``target`` and a
``detail`` holding the versions it expects ("v7 → v8 (cas=7)").
"""

from __future__ import annotations

from collections.abc import Callable

from rotate.chain.model import Chain, Credential, Service
from rotate.core.durations import format_duration
from rotate.core.refs import ObjectRef
from rotate.engine.model import Plan, PlannedStep, PreflightResult
from rotate.stages.rollout import ONDELETE_ACTION

STAGE_BY_KIND = {
    "preflight": 0, "backend.write": 1, "backend.retire": 1, "sync.trigger": 2, "sync.wait": 2,
    "provider.restart": 3, "provider.wait": 3, "config.harvest": 4, "config.write": 4,
    "token.mint": 4, "consumer.restart": 4, "consumer.wait": 4, "readyz.check": 4,
    "token.revoke": 4,
}


#: Subject prefix of the overlap strategy's phase-2 steps (chain.md "Strategies"): the same
#: kinds as phase 1 on the same objects, so they need subjects of their own — the journal's
#: and the run context's ``(kind, subject)`` keys must not mix the two phases.
RETIRE = "retire"


def retire_subject(subject: str) -> str:
    return f"{RETIRE}:{subject}"


def phase_of(subject: str) -> tuple[bool, str]:
    """(is a phase-2 subject, the subject without the prefix)."""
    if subject == RETIRE:
        return True, ""
    if subject.startswith(RETIRE + ":"):
        return True, subject[len(RETIRE) + 1:]
    return False, subject


def add_retire_phase(add: Callable[[str, str, str, str], None], chain: Chain,
                     credential: Credential) -> None:
    """Overlap phase 2: retire the previous value, sync it, roll the provider once more."""
    prev = credential.overlap.previous_key if credential.overlap else "?"
    sec = credential.secret
    add("backend.retire", backend_target(chain, credential),
        f"new version where {prev} := {sec.key} (the previous value is valid nowhere)", "")
    add("sync.wait", f"{sec.namespace}/{sec.name}#{prev}",
        f"force-sync again, until the Secret's {prev} holds the new value", RETIRE)
    for ref in credential.providers:
        add("provider.restart", str(ref), "set restartedAt: drop the previous value",
            retire_subject(str(ref)))
    for ref in credential.providers:
        add("provider.wait", str(ref), "rollout status", retire_subject(str(ref)))


def backend_target(chain: Chain, credential: Credential) -> str:
    return f"{chain.backend.kv_mount}/{credential.backend.path}#{credential.backend.key}"


def workload_ref(service: Service) -> ObjectRef:
    return ObjectRef(service.workload.kind, service.namespace, service.workload.name)


def readyz_target(service: Service) -> str:
    cfg = service.readyz
    if cfg.url:
        return cfg.url
    return f"{service.namespace}/{cfg.service or service.name}:{cfg.port}{cfg.path}"


class _Steps:
    def __init__(self) -> None:
        self.steps: list[PlannedStep] = []

    def add(self, kind: str, target: str, detail: str = "", subject: str = "") -> None:
        self.steps.append(PlannedStep(len(self.steps) + 1, STAGE_BY_KIND[kind], kind, target,
                                      detail, subject))


def _version_detail(n: int | None) -> str:
    if n is None:
        return "version unknown (backend unreachable in preflight)"
    if n == 0:
        return "create v1 (cas=0)"
    return f"v{n} → v{n + 1} (cas={n})"


def build_plan(
    chain: Chain, credential: Credential, strategy: str, observed: PreflightResult
) -> Plan:
    steps = _Steps()
    detail = _version_detail(observed.current_version)
    if strategy == "overlap" and credential.overlap is not None:
        detail += f"; {credential.overlap.previous_key} keeps the previous value"
    steps.add("backend.write", backend_target(chain, credential), detail)
    es = credential.external_secret
    sec = credential.secret
    steps.add("sync.trigger", es.short, "annotate force-sync=<run id + stamp>")
    steps.add("sync.wait", str(sec),
              "until Ready/SecretSynced, refreshTime ≥ trigger and the Secret holds the new value")
    grace = format_duration(chain.defaults.reloader_grace)
    for ref in credential.providers:
        key = str(ref)
        if key in observed.reloader:
            detail = (f"{observed.reloader[key]} watches the Secret: wait {grace} for its "
                      "rollout, roll only if it does not come")
        else:
            detail = "set restartedAt (sub-second) on the pod template"
        steps.add("provider.restart", key, detail, key)
    for ref in credential.providers:
        key = str(ref)
        detail = (ONDELETE_ACTION[ref.kind] if key in observed.ondelete else "rollout status")
        steps.add("provider.wait", key, detail, key)
    services = [chain.services[name] for name in observed.consumers]
    if services:
        steps.add("config.harvest", ", ".join(s.name for s in services),
                  f"{len(services)} document(s) resolved and validated against their schemas")
        for svc in services:
            prev = observed.config_versions.get(svc.name)
            detail = (f"v{prev} → v{prev + 1} (If-Match {prev})" if prev is not None
                      else "create (If-None-Match *)")
            steps.add("config.write", f"{svc.namespace}/{svc.name} {svc.config_key}", detail,
                      svc.name)
        for svc in services:
            steps.add("token.mint", f"{svc.token.namespace}/{svc.token.name}#{svc.token.key}",
                      f"mint a machine token for {svc.name}, deliver it", svc.name)
        for svc in services:
            ref = workload_ref(svc)
            detail = (ONDELETE_ACTION[ref.kind] if str(ref) in observed.ondelete
                      else "set restartedAt on the pod template")
            steps.add("consumer.restart", str(ref), detail, svc.name)
        for svc in services:
            steps.add("consumer.wait", str(workload_ref(svc)), "rollout status", svc.name)
        for svc in services:
            steps.add("readyz.check", readyz_target(svc), "until 200", svc.name)
    if strategy == "overlap":
        add_retire_phase(steps.add, chain, credential)
    if services:
        for svc in services:
            held = observed.token_ids.get(svc.name, ())
            steps.add("token.revoke", svc.name,
                      f"revoke {len(held)} token(s) held before the run", svc.name)
    return Plan(
        credential=credential.name,
        strategy=strategy,
        consumers=tuple(observed.consumers),
        providers=tuple(str(p) for p in credential.providers),
        backend_path=backend_target(chain, credential),
        current_version=observed.current_version,
        preflight=observed.checks,
        traps=observed.traps,
        steps=tuple(steps.steps),
    )

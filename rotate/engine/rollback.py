"""Rollback: put back the values a run replaced, through the whole chain (chain.md).

Built from the original run's journal, never from guesses: the Vault version N it recorded
before writing, the Config Center version each document had before it was written.  The
rollback is a run of its own (operation ``rollback``, own journal, own lock) whose steps are
the same kinds as a rotation, so it is resumable the same way; when it succeeds the original
run is marked ``rolled-back``.

Steps: backend.write (version N's data written as a new version) → sync.trigger →
sync.wait (the Secret holds version N's value) → provider.restart/wait → config.write
(restore each recorded previous version, If-Match the current one) → token.mint (fresh
tokens: the run may have revoked the old ones) → consumer.restart/wait → readyz.check.

Rolling back an overlap run is an overlap itself: the restored value becomes current with
the value being replaced kept as the previous one (consumers still on it keep working while
they move back), then the same phase 2 as a rotation retires it (backend.retire → sync.wait
→ provider.restart/wait).
"""

from __future__ import annotations

from typing import Any

from rotate.chain.model import Chain, Credential
from rotate.clients.seams import Vault
from rotate.core.errors import UsageError
from rotate.engine.journal import RunState
from rotate.engine.model import PlannedStep
from rotate.engine.plan import (
    STAGE_BY_KIND,
    add_retire_phase,
    backend_target,
    readyz_target,
    workload_ref,
)
from rotate.stages import backend


def backend_written(vault: Vault, credential: Credential, orig: RunState) -> int | None:
    """N (the version before the run) if the run wrote a version, else None."""
    steps = [s for s in orig.steps if s.step.kind == "backend.write"]
    if not steps:
        return None
    st = steps[0]
    if "previous_version" not in st.data:
        return None
    n = int(st.data["previous_version"])
    if st.status == "done":
        return n
    if backend.observe(vault, credential.backend.path, orig.run_id, n) is not None:
        return n
    return None


def build_rollback(
    chain: Chain, credential: Credential, orig: RunState, written_from: int | None
) -> tuple[list[PlannedStep], dict[str, Any]]:
    """The rollback steps and the run.start data they need; ([], {}) when nothing changed."""
    if written_from is None:
        return [], {}
    if written_from == 0:
        raise UsageError(f"run {orig.run_id} created {credential.backend.path}; there is no "
                         "previous value to restore")
    steps: list[PlannedStep] = []

    def add(kind: str, target: str, detail: str = "", subject: str = "") -> None:
        steps.append(PlannedStep(len(steps) + 1, STAGE_BY_KIND[kind], kind, target, detail,
                                 subject))

    overlap = orig.strategy == "overlap" and credential.overlap is not None
    add("backend.write", backend_target(chain, credential),
        f"write v{written_from}'s data as a new version"
        + ("; the replaced value stays valid as the previous one" if overlap else ""))
    es, sec = credential.external_secret, credential.secret
    add("sync.trigger", es.short, "annotate force-sync=<run id + stamp>")
    add("sync.wait", str(sec), "until the Secret holds the restored value")
    for ref in credential.providers:
        add("provider.restart", str(ref), "set restartedAt on the pod template", str(ref))
    for ref in credential.providers:
        add("provider.wait", str(ref), "rollout status", str(ref))
    consumers = [str(c) for c in orig.start.get("consumers", []) if c in chain.services]
    restore: dict[str, int] = {}
    for st in orig.steps:
        if st.step.kind == "config.write" and st.status != "pending" and st.data.get(
                "previous_version") is not None and st.step.subject in chain.services:
            restore[st.step.subject] = int(st.data["previous_version"])
    for name in consumers:
        if name in restore:
            svc = chain.services[name]
            add("config.write", f"{svc.namespace}/{name} {svc.config_key}",
                f"restore v{restore[name]}", name)
    for name in consumers:
        tok = chain.services[name].token
        add("token.mint", f"{tok.namespace}/{tok.name}#{tok.key}", "fresh machine token", name)
    for name in consumers:
        add("consumer.restart", str(workload_ref(chain.services[name])), "restartedAt", name)
    for name in consumers:
        add("consumer.wait", str(workload_ref(chain.services[name])), "rollout status", name)
    for name in consumers:
        add("readyz.check", readyz_target(chain.services[name]), "until 200", name)
    if orig.strategy == "overlap" and credential.overlap is not None:
        add_retire_phase(add, chain, credential)
    return steps, {"restore_backend_version": written_from, "restore_config": restore,
                   "consumers": consumers}

"""What each step kind does, given the run context: the glue between the plan and the stages.

Every handler is idempotent with respect to the journal: ``io.prior`` holds what an earlier
attempt of the same step recorded (on resume), and each handler records what it needs to
be redone or undone (``io.record``) *before* the action that makes it necessary.  A handler
returns the data for the ``step.done`` record and a one-line detail; it never returns or
records a secret value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rotate.chain.model import Chain, Credential, Service
from rotate.core.errors import ConflictError, PermanentError, RejectedError, StageFailed
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret, generate, reveal_tree
from rotate.core.waiting import CancelToken, Deadline
from rotate.engine.journal import Journal
from rotate.engine.model import PlannedStep
from rotate.engine.plan import RETIRE, phase_of, workload_ref
from rotate.engine.preflight import Adapters
from rotate.stages import backend, harvest, readyz, rollout, sync, tokens
from rotate.stages.harvest import Document
from rotate.stages.timestamps import parse_rfc3339, rfc3339

Result = tuple[dict[str, Any], str]


@dataclass
class Context:
    """Everything a run's steps share. ``value`` lives only here, in memory."""

    chain: Chain
    credential: Credential
    adapters: Adapters
    run_id: str
    journal: Journal
    cancel: CancelToken
    timeout: float
    max_parallel: int
    operation: str  # "rotate" | "rollback"
    start: dict[str, Any]  # the run.start data
    done: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (kind, subject)
    new_value: Secret | None = None  # --value-stdin; generated otherwise
    value: Secret | None = None
    documents: dict[str, Document] = field(default_factory=dict)

    def deadline(self) -> Deadline:
        return Deadline.after(self.timeout)

    def service(self, name: str) -> Service:
        return self.chain.services[name]

    @property
    def path(self) -> str:
        return self.credential.backend.path

    @property
    def overlap_key(self) -> str | None:
        """The previous key when this run uses the overlap strategy, else None."""
        if self.start.get("strategy") == "overlap" and self.credential.overlap is not None:
            return self.credential.overlap.previous_key
        return None


@dataclass
class StepIO:
    step: PlannedStep
    journal: Journal
    prior: dict[str, Any]  # data recorded by earlier attempts of this step (resume)

    def record(self, **data: Any) -> None:
        """Journal facts needed to redo/undo the step before acting on them."""
        self.journal.append("step.progress", step=self.step, data=data)
        self.prior.update(data)


def _ref(subject: str) -> ObjectRef:
    """``deployment/ns/name`` (str(ObjectRef)) back to an ObjectRef with the proper kind."""
    kind, ns, name = subject.split("/", 2)
    kinds = {k.lower(): k for k in ("Deployment", "StatefulSet", "DaemonSet")}
    return ObjectRef(kinds.get(kind, kind), ns, name)


def ensure_value(ctx: Context) -> Secret:
    """The value this run put in the backend (re-read from it on resume, never regenerated)."""
    if ctx.value is None:
        done = ctx.done.get(("backend.write", ""))
        if done is not None:
            version = int(done["version"])
        else:  # rollback that wrote nothing: whatever the backend holds now
            version = backend.current_version(ctx.adapters.vault, ctx.path)
        ctx.value = backend.read_value(ctx.adapters.vault, ctx.path,
                                       ctx.credential.backend.key, version)
    return ctx.value


def _fresh_value(ctx: Context) -> Secret:
    if ctx.new_value is not None:
        return ctx.new_value
    gen = ctx.credential.generate
    if gen is None:
        raise StageFailed("backend.write", "this credential's value comes from stdin and none "
                          f"was given; run `rotate {ctx.credential.name} --confirm "
                          "--value-stdin` again")
    return generate(gen.length, gen.alphabet)


# --------------------------------------------------------------------------- ① backend


def backend_write(ctx: Context, io: StepIO) -> Result:
    vault = ctx.adapters.vault
    key = ctx.credential.backend.key
    if ctx.operation == "rollback":
        if "cas" in io.prior:
            version = backend.observe(vault, ctx.path, ctx.run_id, int(io.prior["cas"]))
            if version is not None:
                ctx.value = backend.read_value(vault, ctx.path, key, version)
                return ({"previous_version": int(io.prior["cas"]), "version": version},
                        f"restored earlier (v{version})")
        restore_to = int(ctx.start["restore_backend_version"])
        io.record(cas=backend.current_version(vault, ctx.path), restore_to=restore_to)
        w = backend.restore(vault, ctx.path, key, restore_to, ctx.run_id,
                            previous_key=ctx.overlap_key)
        ctx.value = backend.read_value(vault, ctx.path, key, w.version)
        return ({"previous_version": w.previous_version, "version": w.version},
                f"v{restore_to}'s data written as v{w.version}")
    if "previous_version" in io.prior:
        n = int(io.prior["previous_version"])
        version = backend.observe(vault, ctx.path, ctx.run_id, n)
        if version is not None:
            ctx.value = backend.read_value(vault, ctx.path, key, version)
            return ({"previous_version": n, "version": version},
                    f"v{version} was already written by this run; not written again")
        expected: int | None = n
    else:
        planned = ctx.start.get("current_version")
        expected = int(planned) if planned is not None else None
        io.record(previous_version=backend.current_version(vault, ctx.path))
    value = _fresh_value(ctx)
    overlap = ctx.credential.overlap
    w = backend.write(vault, ctx.path, key, value, ctx.run_id, expected_version=expected,
                      previous_key=overlap.previous_key if overlap else None,
                      keep_previous=ctx.overlap_key is not None)
    ctx.value = value
    return ({"previous_version": w.previous_version, "version": w.version},
            f"v{w.previous_version} → v{w.version} (cas={w.previous_version})")


# --------------------------------------------------------------------------- ② sync


def sync_trigger(ctx: Context, io: StepIO) -> Result:
    kube = ctx.adapters.kube
    baselines = {}
    for ref in ctx.credential.providers:
        obj = kube.get(ref.kind, ref.namespace, ref.name)
        baselines[str(ref)] = rollout.baseline(obj).to_json()
    es = ctx.credential.external_secret
    trig = sync.trigger(kube, es.namespace, es.name, ctx.run_id)
    return ({"stamp": trig.stamp, "trigger_time": rfc3339(trig.at), "baselines": baselines},
            f"force-sync={trig.stamp}")


def backend_retire(ctx: Context, io: StepIO) -> Result:
    """Overlap phase 2: the previous key gets the new value (see stages.backend.retire)."""
    vault = ctx.adapters.vault
    prev_key = ctx.overlap_key
    if prev_key is None:
        raise StageFailed("backend.retire", "this run does not use the overlap strategy")
    wrote = int(ctx.done[("backend.write", "")]["version"])
    if "retire_from" in io.prior:
        version = backend.observe(vault, ctx.path, ctx.run_id, int(io.prior["retire_from"]))
        if version is not None:
            return ({"previous_version": wrote, "version": version},
                    f"v{version} was already written by this run; not written again")
    io.record(retire_from=wrote)
    w = backend.retire(vault, ctx.path, ctx.credential.backend.key, prev_key, ctx.run_id,
                       expected_version=wrote)
    return ({"previous_version": w.previous_version, "version": w.version},
            f"v{w.previous_version} → v{w.version}: {prev_key} no longer holds the old value")


def _retire_sync(ctx: Context, io: StepIO) -> Result:
    """Phase-2 sync: trigger and wait in one step (a fresh trigger on every attempt, so a
    resumed wait always has a request ESO has not answered yet)."""
    kube = ctx.adapters.kube
    prev_key = ctx.overlap_key or ""
    baselines = {}
    for ref in ctx.credential.providers:
        baselines[str(ref)] = rollout.baseline(kube.get(ref.kind, ref.namespace,
                                                        ref.name)).to_json()
    es = ctx.credential.external_secret
    sec = ctx.credential.secret
    trig = sync.trigger(kube, es.namespace, es.name, ctx.run_id)
    io.record(stamp=trig.stamp, trigger_time=rfc3339(trig.at), baselines=baselines)
    proof = sync.wait(kube, (es.namespace, es.name), (sec.namespace, sec.name, prev_key),
                      ensure_value(ctx), trig.at, deadline=ctx.deadline(), cancel=ctx.cancel)
    return ({"stamp": trig.stamp, "trigger_time": rfc3339(trig.at), "baselines": baselines,
             "refresh_time": proof.refresh_time},
            f"Ready/SecretSynced at {proof.refresh_time}; the Secret's {prev_key} holds the "
            "current value")


def sync_wait(ctx: Context, io: StepIO) -> Result:
    if phase_of(io.step.subject)[0]:
        return _retire_sync(ctx, io)
    trig = ctx.done[("sync.trigger", "")]
    es = ctx.credential.external_secret
    sec = ctx.credential.secret
    proof = sync.wait(ctx.adapters.kube, (es.namespace, es.name),
                      (sec.namespace, sec.name, sec.key), ensure_value(ctx),
                      parse_rfc3339(str(trig["trigger_time"])), deadline=ctx.deadline(),
                      cancel=ctx.cancel)
    return ({"refresh_time": proof.refresh_time},
            f"Ready/SecretSynced at {proof.refresh_time}; the Secret holds the "
            + ("restored value" if ctx.operation == "rollback" else "new value"))


# --------------------------------------------------------------------------- ③ / ④ rollouts


def _restart(ctx: Context, ref: ObjectRef, *, provider: bool, retire: bool = False) -> Result:
    kube = ctx.adapters.kube
    # Phase 2 rolls the same workload a second time: it is marked with its own id, or a
    # resumed run would take phase 1's mark for "already restarted" and never roll again.
    marker = f"{ctx.run_id}.{RETIRE}" if retire else ctx.run_id
    already = rollout.observe_restart(kube, ref, marker)
    if already is not None:
        return ({"generation": already.generation, "via": "already"},
                f"already restarted by this run (generation {already.generation})")
    if provider:
        obj = kube.get(ref.kind, ref.namespace, ref.name)
        other = rollout.reloader_watches(obj, ctx.credential.secret.name)
        if other is not None:
            trig = ctx.done.get(("sync.wait", RETIRE) if retire else ("sync.trigger", ""),
                                {})
            base = (trig.get("baselines") or {}).get(str(ref))
            before = rollout.Baseline.from_json(base) if base else rollout.baseline(obj)
            came = rollout.wait_for_reloader(kube, ref, before,
                                             grace=ctx.chain.defaults.reloader_grace,
                                             cancel=ctx.cancel)
            if came is not None:
                return ({"generation": came.generation, "via": "reloader"},
                        f"{other} rolled it (generation {came.generation}); not rolled again")
    r = rollout.restart(kube, ref, marker)
    return ({"generation": r.generation, "stamp": r.stamp, "via": r.via},
            f"restartedAt={r.stamp} (generation {r.generation})")


def _wait(ctx: Context, ref: ObjectRef, kind: str, subject: str) -> Result:
    kube = ctx.adapters.kube
    gen = int(ctx.done.get((kind, subject), {}).get("generation") or 0)
    obj = kube.get(ref.kind, ref.namespace, ref.name)
    if ref.kind in rollout.ONDELETE_ACTION and rollout.update_strategy(obj) == "OnDelete":
        rollout.roll_ondelete(kube, ref, gen, deadline=ctx.deadline(), cancel=ctx.cancel)
    message = rollout.wait_rollout(kube, ref, gen, deadline=ctx.deadline(), cancel=ctx.cancel)
    return {"generation": gen}, message


def provider_restart(ctx: Context, io: StepIO) -> Result:
    retire, subject = phase_of(io.step.subject)
    return _restart(ctx, _ref(subject), provider=True, retire=retire)


def provider_wait(ctx: Context, io: StepIO) -> Result:
    return _wait(ctx, _ref(phase_of(io.step.subject)[1]), "provider.restart", io.step.subject)


def consumer_restart(ctx: Context, io: StepIO) -> Result:
    return _restart(ctx, workload_ref(ctx.service(io.step.subject)), provider=False)


def consumer_wait(ctx: Context, io: StepIO) -> Result:
    return _wait(ctx, workload_ref(ctx.service(io.step.subject)), "consumer.restart",
                 io.step.subject)


# --------------------------------------------------------------------------- ④ config


def config_harvest(ctx: Context, io: StepIO) -> Result:
    problems: list[str] = []
    consumers = [str(c) for c in ctx.start.get("consumers", [])]
    for name in consumers:
        doc = harvest.harvest(ctx.adapters.kube, ctx.service(name))
        ctx.documents[name] = doc
        problems.extend(str(p) for p in doc.problems)
    if problems:
        raise RejectedError("rotate", "harvest", "; ".join(problems))
    return {"documents": consumers}, f"{len(consumers)} document(s) valid"


def _document(ctx: Context, name: str) -> Mapping[str, Any]:
    doc = ctx.documents.get(name)
    if doc is None:  # resumed after the harvest step: harvest again (reads only)
        doc = harvest.harvest(ctx.adapters.kube, ctx.service(name))
        if not doc.ok:
            raise RejectedError("rotate", "harvest", "; ".join(str(p) for p in doc.problems))
        ctx.documents[name] = doc
    return doc.value


def config_write(ctx: Context, io: StepIO) -> Result:
    cc = ctx.adapters.config_center
    svc = ctx.service(io.step.subject)
    key = svc.config_key
    if ctx.operation == "rollback":
        restore_to = int(ctx.start["restore_config"][svc.name])
        if "cas" in io.prior:
            current = cc.get_version_number(svc.name, key)
            if current is not None and current > int(io.prior["cas"]):
                old = cc.get_version(svc.name, key, restore_to) if hasattr(
                    cc, "get_version") else None
                now = cc.get_key(svc.name, key)
                if old is None or dict(old.value) == dict(now.value):
                    return ({"previous_version": int(io.prior["cas"]), "version": now.version},
                            f"restored earlier (v{now.version})")
        current = cc.get_version_number(svc.name, key)
        if current is None:
            raise PermanentError("config center", f"{svc.name}/{key}", "key no longer exists")
        io.record(cas=current)
        version = cc.restore_version(svc.name, key, restore_to, if_match=current)
        return ({"previous_version": current, "version": version},
                f"v{restore_to} restored as v{version}")
    document = _document(ctx, svc.name)
    if "previous_version" in io.prior:
        prev = io.prior["previous_version"]
        current = cc.get_version_number(svc.name, key)
        if current != prev:
            now = cc.get_key(svc.name, key)
            if dict(now.value) == reveal_tree(document):
                return ({"previous_version": prev, "version": now.version},
                        f"already written (v{now.version})")
            raise ConflictError("config center", f"write {svc.name}/{key}",
                                f"version moved from v{prev} to v{current} since this run read it")
    else:
        prev = cc.get_version_number(svc.name, key)
        io.record(previous_version=prev)
    version = cc.put_key(svc.name, key, document,
                         if_match=int(prev) if prev is not None else None)
    shown = f"v{prev} → v{version}" if prev is not None else f"created v{version}"
    return {"previous_version": prev, "version": version}, shown


# --------------------------------------------------------------------------- ④ tokens, readyz


def token_mint(ctx: Context, io: StepIO) -> Result:
    cc = ctx.adapters.config_center
    svc = ctx.service(io.step.subject)
    if "previous_ids" not in io.prior:
        io.record(previous_ids=tokens.current_ids(cc, svc.name))

    def minted(token_id: str) -> None:
        io.record(minted_ids=[*io.prior.get("minted_ids", []), token_id])

    tid = tokens.mint_and_deliver(cc, ctx.adapters.kube, svc.name, svc.token.namespace,
                                  svc.token.name, svc.token.key, on_minted=minted)
    return ({"token_id": tid, "previous_ids": list(io.prior["previous_ids"]),
             "minted_ids": list(io.prior.get("minted_ids", []))},
            f"token {tid} delivered to {svc.token.namespace}/{svc.token.name}")


def readyz_check(ctx: Context, io: StepIO) -> Result:
    svc = ctx.service(io.step.subject)
    message = readyz.wait_ready(ctx.adapters.readyz, readyz.target_for(svc),
                                deadline=ctx.deadline(), cancel=ctx.cancel)
    return {}, message


def token_revoke(ctx: Context, io: StepIO) -> Result:
    svc = ctx.service(io.step.subject)
    minted = ctx.done.get(("token.mint", svc.name), {})
    keep = {minted.get("token_id")}
    # tokens held before the run, and tokens minted by an earlier attempt that never got
    # delivered (the attempt failed after minting): neither is used by the new pods
    candidates = [*minted.get("previous_ids", []), *minted.get("minted_ids", [])]
    ids = list(dict.fromkeys(i for i in candidates if i not in keep))
    revoked = tokens.revoke(ctx.adapters.config_center, svc.name, ids)
    return {"revoked": revoked}, f"revoked {len(revoked)} token(s)"


HANDLERS: dict[str, Callable[[Context, StepIO], Result]] = {
    "backend.write": backend_write,
    "backend.retire": backend_retire,
    "sync.trigger": sync_trigger,
    "sync.wait": sync_wait,
    "provider.restart": provider_restart,
    "provider.wait": provider_wait,
    "config.harvest": config_harvest,
    "config.write": config_write,
    "token.mint": token_mint,
    "consumer.restart": consumer_restart,
    "consumer.wait": consumer_wait,
    "readyz.check": readyz_check,
    "token.revoke": token_revoke,
}

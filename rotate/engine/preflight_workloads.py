"""Preflight's workloads part: are the providers and consumers healthy, and how will each one
roll (chain.md "Preflight", "Traps preflight catches")?

Observe only.  It reads each workload once, the Vault Secrets Operator objects of each
namespace once, and looks for Reloader once; the consumers' reads fan out, and what they
found is put back in chain order, so the output does not depend on which thread finished
first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rotate.chain.model import Chain, Credential
from rotate.clients.seams import Kube
from rotate.core.durations import format_duration
from rotate.core.errors import ClientError, NotFoundError
from rotate.core.refs import ObjectRef
from rotate.core.waiting import Deadline, WaitTimeout
from rotate.engine.collector import Collector, Fanned, note_uid
from rotate.engine.fanout import fan_out
from rotate.engine.lock import lease_name
from rotate.engine.model import Trap
from rotate.engine.preflight_readers import (
    budgets,
    discover,
    disruption,
    external_secret_checks,
)
from rotate.engine.targets import parse_workload, workload_ref
from rotate.stages import reloader_presence, rollout, staged, surge, traps


@dataclass
class WorkloadFindings:
    """The workloads part's checks and traps, and what the plan needs to know of each
    workload (the fields of ``PreflightResult`` of the same names)."""

    found: Collector = field(default_factory=Collector)
    reloader: dict[str, str] = field(default_factory=dict)
    ondelete: list[str] = field(default_factory=list)
    no_surge: dict[str, str] = field(default_factory=dict)
    thinned: dict[str, str] = field(default_factory=dict)
    unprobed: list[str] = field(default_factory=list)
    #: workloads that read the Secret themselves: ref → words; and those restarted
    readers: dict[str, str] = field(default_factory=dict)
    reader_restarts: tuple[str, ...] = ()
    external_secrets: tuple[str, ...] = ()
    #: consumer ref → why its restart is an outage anyway (a PDB, a single replica)
    outage: dict[str, str] = field(default_factory=dict)


def workload_findings(chain: Chain, credential: Credential, kube: Kube,
                      consumers: tuple[str, ...], uids: dict[ObjectRef, str]) -> WorkloadFindings:
    out = WorkloadFindings()
    col, grace, secret_name = out.found, chain.defaults.reloader_grace, credential.secret.name
    vso_seen: dict[str, list[dict[str, Any]]] = {}
    pdb_seen: dict[str, list[dict[str, Any]]] = {}
    sightings: dict[bool, reloader_presence.Sighting] = {}

    def vso_objects(namespace: str) -> list[dict[str, Any]]:
        """VSO objects in ``namespace``; none when VSO is not installed (404)."""
        if namespace not in vso_seen:
            found: list[dict[str, Any]] = []
            for kind in rollout.VSO_KINDS:
                try:
                    found += kube.list(kind, namespace)
                except NotFoundError:
                    pass
                except ClientError as exc:
                    col.add(f"vso.visible {namespace}", False,
                            f"cannot list {kind} in {namespace} ({exc.reason}): a Vault "
                            "Secrets Operator rolloutRestartTargets would go unnoticed",
                            fatal=False)
            vso_seen[namespace] = found
        return vso_seen[namespace]

    def sighting(who: str) -> reloader_presence.Sighting:
        """Reloader is looked for (once); for Wave or VSO the tool cannot tell."""
        if not who.startswith("Reloader"):
            return reloader_presence.Sighting("unknown", f"no check for {who.split(' ')[0]}")
        if True not in sightings:
            sightings[True] = reloader_presence.find_reloader(kube)
        return sightings[True]

    def workload(ref: ObjectRef, role: str, sink: list[Trap]) -> Callable[[], str]:
        def check() -> str:
            obj = kube.get(ref.kind, ref.namespace, ref.name)
            note_uid(uids, ref, obj)
            vso = rollout.vso_watches(vso_objects(ref.namespace), ref.kind, ref.name)
            rolled = role == "provider" and not credential.apply_of(ref).live
            sink.extend(traps.workload_traps(obj, ref, role=role, secret_name=secret_name,
                                             grace=grace, rolled_by=vso, rolled=rolled))
            other = rollout.reloader_watches(obj, secret_name) or vso
            if other and role == "provider":
                out.reloader[str(ref)] = reloader_presence.wait_phrase(
                    other, sighting(other), format_duration(grace))
            if rollout.update_strategy(obj) == "OnDelete":
                out.ondelete.append(str(ref))
            if role == "consumer":
                surged = surge.verdict(obj)
                (out.thinned if surged.early else out.no_surge)[str(ref)] = surged.note
                if surged.early and staged.no_startup_probe(obj):
                    out.unprobed.append(str(ref))
                why = disruption(obj, ref, pdb_seen.get(ref.namespace, []), not surged.early)
                if why is not None:
                    out.outage[str(ref)] = why
            done, message = rollout.rollout_status(obj)
            if not done and role == "consumer":
                done, message = _after_shared_rollout(chain, kube, ref, obj, message)
            if not done:
                raise NotFoundError("kubernetes", str(ref), f"not healthy now: {message}")
            return message
        return check

    for ref in credential.providers:
        col.run(f"provider.healthy {ref}", workload(ref, "provider", col.traps))
    found = discover(chain, credential, kube, col)
    out.readers, out.reader_restarts = found.words, found.restarts
    out.external_secrets = tuple(found.external_secrets)
    external_secret_checks(kube, found, col, uids)
    refs = {name: workload_ref(chain.services[name]) for name in consumers}
    refs.update({ref: parse_workload(ref) for ref in out.reader_restarts})
    names = (*consumers, *out.reader_restarts)
    for name in names:  # sequential: a namespace's VSO objects and budgets are listed once
        vso_objects(refs[name].namespace)
        budgets(kube, refs[name].namespace, col, pdb_seen)

    def consumer_health(name: str) -> Fanned:
        local, sink = Collector(), list[Trap]()
        local.run(f"consumer.healthy {name}", workload(refs[name], "consumer", sink))
        return Fanned(local.checks, sink)

    col.merge(fan_out(names, consumer_health))
    for name in names:
        why = out.outage.get(str(refs[name]))
        if why is not None:
            col.add(f"consumer.outage {name}", False, why, fatal=False)
    # the consumer checks ran on threads: lists they appended to are put back in chain order
    order = [str(r) for r in credential.providers] + [str(refs[n]) for n in names]
    out.ondelete.sort(key=lambda r: order.index(r) if r in order else len(order))
    out.unprobed.sort(key=lambda r: order.index(r) if r in order else len(order))
    return out


#: how long preflight waits for another run's rollout of a shared consumer to finish
SHARED_ROLLOUT_WAIT = 120.0
_RUN_ID = re.compile(r"^\d{8}T\d{6}Z-(?P<credential>.+)-[0-9a-f]+$")


def _after_shared_rollout(chain: Chain, kube: Kube, ref: ObjectRef, obj: dict[str, Any],
                          message: str) -> tuple[bool, str]:
    """A consumer another rotate run is rolling right now — a credential sharing it (its
    ``rotate.dev/run-id``, and that run holds its Lease) — is waited for rather than refused:
    the two runs commute (docs/reliability.md "Two credentials sharing consumers").  Any
    other unfinished rollout, or one that does not finish in time, is not healthy."""
    run_id = str(rollout.meta_annotations(obj).get(rollout.RUN_ID_ANNOTATION) or "")
    found = _RUN_ID.match(run_id)
    if found is None:
        return False, message
    try:
        lease = kube.get("Lease", chain.cluster.lock_namespace, lease_name(found["credential"]))
    except ClientError:
        return False, message
    holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
    if not holder.endswith("/" + run_id):
        return False, message
    try:
        done = rollout.wait_rollout(kube, ref, rollout.generation(obj),
                                    deadline=Deadline.after(SHARED_ROLLOUT_WAIT))
    except (WaitTimeout, ClientError):
        return False, f"{message} (run {run_id} is rolling it)"
    return True, f"{done} (after run {run_id}'s rollout)"

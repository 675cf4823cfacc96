"""The check from outside the tool (docs/reliability.md "Fault matrix"): a case's baseline
and the judgement of the world it leaves, without asking rotate (bench/fault_world.py).

Invariants:

- The baseline (``rebase``) is taken before the disturbance, and again by a case that writes
  its own starting point first (adopt): every expectation is a difference from it, so a
  case never depends on what an earlier case left behind.
- A credential is judged by what it was expected to show (``rotated``, ``restored``,
  ``unchanged``), counted in OpenBao versions (``Credential.per_rotation``: a rollback is a
  rotation back), then every copy of OpenBao's value is compared with it: the Secrets,
  Dragonfly's own AUTH, every consumer's Config Center document, one live token each.
- Problems are appended to the case's ``Outcome``; nothing here raises for a failed check,
  so one case reports every way it went wrong.
"""

from __future__ import annotations

from bench.fault_matrix import Outcome, Spec
from bench.fault_world import READERS, Credential, World, wait

#: the pointer no credential owns that a human edit changes too (the schema allows no new
#: one): the host spelled capitalised, which resolves the same (DNS is case-insensitive)
HUMAN_KEEP = ("dragonfly", "host")
#: what a human's `bao kv put` writes in the middle of a run (bao-write)
BY_HAND = "written-by-hand-while-rotate-ran-0123456789"


class Checked:
    """A case's baseline and its outside check; ``Case`` (bench/fault_case.py) sets the
    attributes and disturbs the world in between."""

    world: World
    creds: dict[str, Credential]
    spec: Spec
    out: Outcome
    kept: str  # a human edit: the value it gave a pointer no credential owns
    v0: dict[str, int]
    value0: dict[str, str]
    known: set[str]

    def rebase(self) -> None:
        """The baseline the checks compare with: OpenBao's versions and values, the runs."""
        w, creds = self.world, self.creds
        self.v0 = {c: w.bao_version(cred) for c, cred in creds.items()}
        self.value0 = {c: w.bao_value(cred) for c, cred in creds.items()}
        self.known = w.known_runs()


    def check(self, expect: dict[str, str], v1: dict[str, int]) -> None:
        w, p = self.world, self.out.problems
        # a human restart / a roll may still be under way: judge the state it settles in
        workloads = ["dragonfly/dragonfly", *(f"shop/{s}" for s in w.shop()), *READERS]
        if not wait(lambda: all(w.rolled_out(t) for t in workloads), 120, every=0.5):
            p.append("rollout not finished: " + ", ".join(
                t for t in workloads if not w.rolled_out(t)))
        if not wait(lambda: all(w.readyz(s) for s in w.shop()), 90, every=0.5):
            p.append("readyz: " + ", ".join(s for s in w.shop() if not w.readyz(s)))
        drifted = self.spec.disturbance == "bao-write"
        for name, cred in self.creds.items():
            version, value = w.bao_version(cred), w.bao_value(cred)
            added, was = version - self.v0[name], expect[name]
            # a drift adds the human's write and, on resume, the run's version put back
            want = cred.per_rotation + (2 if drifted and name == self.spec.credential else 0)
            if was == "rotated" and (added != want or value == self.value0[name]):
                p.append(f"{name}: OpenBao +{added} version(s), expected +{want}"
                         f"{' and a new value' if value == self.value0[name] else ''}")
            if drifted and name == self.spec.credential and str(w.bao_data(
                    cred, self.v0[name] + 2).get(cred.bao_key)) != BY_HAND:
                p.append(f"{name}: the human's write is not in OpenBao's history any more")
            # a rollback is a rotation back: restore (+ its retire under overlap)
            back = version - v1[name]
            # after a drift, the run's version put back before the rollback adds one more
            want_back = cred.per_rotation + (1 if drifted and name == self.spec.credential
                                             else 0)
            if was == "restored" and (back != want_back or value != self.value0[name]):
                lost = ", not the value before the run" if value != self.value0[name] else ""
                p.append(f"{name}: rollback added +{back} version(s), expected "
                         f"+{want_back}{lost}")
            if was == "unchanged" and (added or value != self.value0[name]):
                p.append(f"{name}: OpenBao changed (+{added}) by a run that should not")
            self.check_copies(cred, value, version)

    def check_copies(self, cred: Credential, value: str, version: int) -> None:
        w, p = self.world, self.out.problems
        if w.secret_value(cred) != value:
            p.append(f"{cred.name}: Secret differs from OpenBao")
        for copy in cred.copies:
            if w.secret_value(cred, copy) != value:
                p.append(f"{cred.name}: Secret {copy[0]}/{copy[1]} differs from OpenBao")
        if cred.auth_user and not w.dragonfly_auth(cred.auth_user, value):
            p.append(f"{cred.name}: Dragonfly refuses OpenBao's value for {cred.auth_user}")
        if cred.auth_user and cred.per_rotation == 1 and version > 1:  # restart: old is gone
            old = str(w.bao(f"secret/data/{cred.bao_path}?version={version - 1}")
                      ["data"][cred.bao_key])
            if old != value and w.dragonfly_auth(cred.auth_user, old):
                p.append(f"{cred.name}: Dragonfly still accepts the replaced value")
        for svc in cred.consumers:
            if w.document_value(svc, cred) != value:
                p.append(f"{cred.name}: Config Center {svc}/bootstrap differs from OpenBao")
            if (live := w.live_tokens(svc)) != 1:
                p.append(f"{svc}: {live} live tokens")
        if self.spec.disturbance == "human-edit" and cred.name == self.spec.credential \
                and w.document_at(self.spec.target, HUMAN_KEEP) != self.kept:
            p.append(f"{self.spec.target}: the human's edit of a pointer no credential owns "
                     "was lost")


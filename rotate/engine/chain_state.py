"""Where the chain stands after a run stopped, in plain words, from the journal alone.

Every failure message says it (cli.md "Failure"): what is proven done — the backend's
version, the Secret, each provider, each consumer's document, token and rollout — so the
operator knows what the ``resume`` or ``rollback`` it names will find.  Only what the
journal says is done counts; what a step may have changed before it failed is worded as
"may still".

The words are this module's; what each journaled step tells is its kind's (``StepKind.tells``:
a :class:`~rotate.engine.kinds.base.Told` per journal status), so no kind is known here by
its name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from rotate.engine import journal as journal_mod
from rotate.engine.kinds import find
from rotate.engine.kinds.base import PLANNED, Run, Told


class _Told:
    """The journal's steps by what they tell, in journal order."""

    def __init__(self, state: journal_mod.RunState) -> None:
        self._steps: dict[Told, list[journal_mod.StepState]] = defaultdict(list)
        for st in state.steps:
            kind = find(st.step)
            if kind is None:
                continue
            for told in (*kind.tells.get(PLANNED, ()), *kind.tells.get(st.status, ())):
                self._steps[told].append(st)

    def steps(self, told: Told) -> list[journal_mod.StepState]:
        return self._steps.get(told, [])

    def subjects(self, told: Told) -> set[str]:
        return {st.step.subject for st in self.steps(told)}


def describe_members(runs: Mapping[str, Run], state: journal_mod.RunState) -> str:
    """:func:`describe_state` of a run of several credentials: each one's words in turn."""
    from rotate.engine.merge import member_state

    return " — ".join(f"{name}: {describe_state(run, member_state(state, name))}"
                      for name, run in runs.items())


def describe_state(run: Run, state: journal_mod.RunState) -> str:
    """Plain words for where the chain stands, from the journal (what is proven done)."""
    cred = run.credential
    told = _Told(state)
    parts: list[str] = []
    path = f"{run.chain.backend.kv_mount}/{cred.backend.path}"
    wrote = told.steps(Told.BACKEND_WRITTEN)
    if wrote:
        d = wrote[0].data
        if told.steps(Told.BACKEND_UNCONFIRMED):
            parts.append(f"the backend {path} got v{d.get('version')} from this run "
                         f"(previous v{d.get('previous_version')}), which is not proven to "
                         "be its current version any more")
        else:
            parts.append(f"the backend {path} holds v{d.get('version')} "
                         f"(previous v{d.get('previous_version')})")
    else:
        parts.append(f"the backend {path} is unchanged")
        return "; ".join(parts) + "; nothing else was changed"
    sec = cred.secret
    if told.steps(Told.SECRET_SYNCED):
        parts.append(f"the Secret {sec.namespace}/{sec.name} holds it")
    else:
        parts.append(f"the Secret {sec.namespace}/{sec.name} may still hold the old value")
    providers = _providers_state(told, [str(ref) for ref in cred.providers])
    parts.extend(text for text, _ in providers)
    if state.start.consumers:
        # under restart a provider refuses the old value once it switched (or may have)
        moved = {how for _, how in providers} if state.strategy == "restart" else set()
        switched = "yes" if "yes" in moved else "maybe" if "maybe" in moved else ""
        parts.extend(_consumers_state(state, told, switched))
    if state.strategy == "overlap" and cred.overlap is not None:
        prev = cred.overlap.previous_key
        if told.steps(Told.BACKEND_RETIRED):
            parts.append(f"the backend's {prev} no longer holds the old value (retired)")
        else:
            parts.append(f"the old value is still valid as {prev} (overlap not retired yet)")
    return "; ".join(parts)


def _providers_state(told: _Told, providers: list[str]) -> list[tuple[str, str]]:
    """Per provider: its words, and whether it took the new value (``yes``, ``maybe``,
    ``no``).  A rolled provider and one changed live, then verified, are told apart: the
    second never rolls."""
    retiring = told.subjects(Told.PROVIDER_RETIRING)
    retired = told.subjects(Told.PROVIDER_RETIRED)

    def overlap(ref: str) -> str:
        """An overlap's live provider holds both values until it is retired."""
        if ref not in retiring:
            return ""
        retire = next(st.step.kind for st in told.steps(Told.PROVIDER_RETIRING)
                      if st.step.subject == ref)
        return (", and no longer the old one (retired)" if ref in retired
                else f", and still the old one until {retire}")

    # what each provider is said to be: the first row whose steps name it
    said = (
        (Told.PROVIDER_ROLLED, "rolled", "yes", False),
        (Told.PROVIDER_VERIFIED, "takes the new value (changed live, verified)", "yes", True),
        (Told.PROVIDER_APPLIED, "changed live, not verified yet", "yes", True),
        (Told.PROVIDER_MAY_BE_APPLIED, "may have been changed live", "maybe", False),
        (Told.PROVIDER_RESTARTED, "restarted, its rollout not proven (may run either value)",
         "maybe", False),
        (Told.PROVIDER_LIVE, "not changed yet (takes the old value)", "no", False),
    )
    named = {fact: told.subjects(fact) for fact, *_ in said}
    out: list[tuple[str, str]] = []
    for ref in providers:
        words, how, both = next(((w, h, b) for fact, w, h, b in said if ref in named[fact]),
                                ("not rolled (may still run the old value)", "no", False))
        out.append((f"{ref} {words}" + (overlap(ref) if both else ""), how))
    return out


def _consumers_state(state: journal_mod.RunState, told: _Told, switched: str) -> list[str]:
    """The consumers' side of :func:`describe_state`: documents, tokens, rollouts;
    ``switched``: ``yes`` a provider refuses the old value now, ``maybe`` it may, "" not."""
    parts: list[str] = []
    documents = told.steps(Told.DOCUMENT_WRITTEN)
    written = [s.step.subject for s in documents if s.step.index not in state.undone]
    restored = [s.step.subject for s in documents if s.step.index in state.undone]
    if written:
        parts.append("Config Center documents written for " + ", ".join(written))
    if restored:
        parts.append("Config Center documents restored for " + ", ".join(restored))
    revoked = told.subjects(Told.TOKENS_REVOKED)
    minted = [s.step.subject for s in told.steps(Told.TOKEN_DELIVERED)
              if s.step.subject not in revoked]
    if minted:
        parts.append("new machine tokens delivered for " + ", ".join(minted)
                     + " (the old ones stay valid until the run's last step)")
    done = told.subjects(Told.CONSUMER_ROLLED)
    started = [s.step.subject for s in told.steps(Told.CONSUMER_RESTARTED)
               if s.step.index not in state.undone and s.step.subject not in done]
    if started:
        parts.append(", ".join(started) + " restarted, new pods not proven Ready yet"
                     + ("" if switched else " (old pods serve until they are)"))
    consumers = state.start.consumers
    new = [c for c in consumers if c in done]
    old = [c for c in consumers if c not in done]
    if new:
        parts.append(", ".join(new) + " rolled with the new value")
    if old:
        parts.append(", ".join(old) + (" still runs" if len(old) == 1 else " still run")
                     + " with the old value"
                     + {"yes": ", which the provider refuses since the switch",
                        "maybe": ", which the provider may refuse now"}.get(switched, ""))
    return parts

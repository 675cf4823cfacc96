"""Where the chain stands after a run stopped, in plain words, from the journal alone.

Every failure message says it (cli.md "Failure"): what is proven done — the backend's
version, the Secret, each provider, each consumer's document, token and rollout — so the
operator knows what the ``resume`` or ``rollback`` it names will find.  Only what the
journal says is done counts; what a step may have changed before it failed is worded as
"may still".
"""

from __future__ import annotations

from rotate.engine import journal as journal_mod
from rotate.engine.kinds.base import Run


def describe_state(run: Run, state: journal_mod.RunState) -> str:
    """Plain words for where the chain stands, from the journal (what is proven done)."""
    cred = run.credential
    parts: list[str] = []
    path = f"{run.chain.backend.kv_mount}/{cred.backend.path}"
    wrote = state.done("backend.write")
    if wrote:
        d = wrote[0].data
        parts.append(f"the backend {path} holds v{d.get('version')} "
                     f"(previous v{d.get('previous_version')})")
    else:
        parts.append(f"the backend {path} is unchanged")
        return "; ".join(parts) + "; nothing else was changed"
    sec = cred.secret
    if state.done("sync.wait"):
        parts.append(f"the Secret {sec.namespace}/{sec.name} holds it")
    else:
        parts.append(f"the Secret {sec.namespace}/{sec.name} may still hold the old value")
    providers = _providers_state(state, [str(ref) for ref in cred.providers])
    parts.extend(text for text, _ in providers)
    if state.start.consumers:
        # under restart a provider refuses the old value once it switched (or may have)
        moved = {how for _, how in providers} if state.strategy == "restart" else set()
        switched = "yes" if "yes" in moved else "maybe" if "maybe" in moved else ""
        parts.extend(_consumers_state(state, switched))
    if state.strategy == "overlap" and cred.overlap is not None:
        prev = cred.overlap.previous_key
        if state.done("backend.retire"):
            parts.append(f"the backend's {prev} no longer holds the old value (retired)")
        else:
            parts.append(f"the old value is still valid as {prev} (overlap not retired yet)")
    return "; ".join(parts)


def _providers_state(state: journal_mod.RunState,
                     providers: list[str]) -> list[tuple[str, str]]:
    """Per provider: its words, and whether it took the new value (``yes``, ``maybe``,
    ``no``).  A rolled provider (``provider.wait``) and one changed live (``provider.apply``,
    then ``provider.verify``) are told apart: the second never rolls."""
    def subjects(kind: str, *statuses: str) -> set[str]:
        return {s.step.subject for s in state.steps
                if s.step.kind == kind and s.status in statuses}

    rolled = subjects("provider.wait", "done")
    verified = subjects("provider.verify", "done")
    applied = subjects("provider.apply", "done")
    tried = subjects("provider.apply", "running", "failed", "interrupted")
    restarted = subjects("provider.restart", "done", "running", "failed", "interrupted")
    live = {s.step.subject for s in state.steps if s.step.kind == "provider.apply"}
    retiring = {s.step.subject for s in state.steps if s.step.kind == "provider.retire"}
    retired = subjects("provider.retire", "done")

    def overlap(ref: str) -> str:
        """An overlap's live provider holds both values until its ``provider.retire``."""
        if ref not in retiring:
            return ""
        return (", and no longer the old one (retired)" if ref in retired
                else ", and still the old one until provider.retire")

    # what each provider is said to be: the first row whose steps name it
    said = (
        (rolled, "rolled", "yes", False),
        (verified, "takes the new value (changed live, verified)", "yes", True),
        (applied, "changed live, not verified yet", "yes", True),
        (tried, "may have been changed live", "maybe", False),
        (restarted, "restarted, its rollout not proven (may run either value)", "maybe", False),
        (live, "not changed yet (takes the old value)", "no", False),
    )
    out: list[tuple[str, str]] = []
    for ref in providers:
        words, how, both = next(((w, h, b) for names, w, h, b in said if ref in names),
                                ("not rolled (may still run the old value)", "no", False))
        out.append((f"{ref} {words}" + (overlap(ref) if both else ""), how))
    return out


def _consumers_state(state: journal_mod.RunState, switched: str) -> list[str]:
    """The consumers' side of :func:`describe_state`: documents, tokens, rollouts;
    ``switched``: ``yes`` a provider refuses the old value now, ``maybe`` it may, "" not."""
    parts: list[str] = []
    written = [s.step.subject for s in state.done("config.write")
               if s.step.index not in state.undone]
    restored = [s.step.subject for s in state.done("config.write")
                if s.step.index in state.undone]
    if written:
        parts.append("Config Center documents written for " + ", ".join(written))
    if restored:
        parts.append("Config Center documents restored for " + ", ".join(restored))
    revoked = {s.step.subject for s in state.done("token.revoke")}
    minted = [s.step.subject for s in state.done("token.mint") if s.step.subject not in revoked]
    if minted:
        parts.append("new machine tokens delivered for " + ", ".join(minted)
                     + " (the old ones stay valid until the run's last step)")
    done = {s.step.subject for s in state.done("consumer.wait")}
    started = [s.step.subject for s in state.done("consumer.restart")
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

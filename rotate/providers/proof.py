"""provider.verify's proofs, from outside: fresh AUTH/logins through an :class:`AuthProbe`.

Method-independent: a proof only logs in.  Refusal is an answer; an unreachable provider
is retried until the step's deadline (:func:`rotate.core.waiting.wait_for`), then the proof
fails with :class:`ProviderProofFailed`, naming the likely cause.
"""

from __future__ import annotations

from dataclasses import dataclass

from rotate.chain.model import ProviderApply
from rotate.clients.provider_seams import AuthProbe
from rotate.core.errors import PermanentError
from rotate.core.secret import Secret
from rotate.core.waiting import Deadline, WaitTimeout, wait_for
from rotate.providers.method import Accounts
from rotate.providers.registry import method_for

#: a live method's change that the server behind the Service does not show
_LIVE_HINT = ("the change did not reach the server behind the Service (another server or a "
              "replica answering?); rollback restores the old password")


class ProviderProofFailed(PermanentError):
    """provider.verify: the provider does not accept the new value, or (hard cut, retire)
    still accepts the old one.  ``hint`` names the likely cause."""

    def __init__(self, system: str, operation: str, reason: str, *, hint: str) -> None:
        super().__init__(system, operation, f"{reason}; likely cause: {hint}")
        self.hint = hint


@dataclass(frozen=True)
class Acceptance:
    new: bool  # accounts.new accepts the new value
    old: bool  # accounts.old accepts the old value


def observe(probe: AuthProbe, accounts: Accounts, old: Secret, new: Secret) -> Acceptance:
    return Acceptance(new=probe.accepts(accounts.new, new), old=probe.accepts(accounts.old, old))


def hint_for(applied: ProviderApply) -> str:
    """Why a proof likely failed: a rollout provider was only restarted (the hint of the
    method speaking its probe's protocol), else a live change did not reach the server."""
    return _LIVE_HINT if applied.live else method_for(applied).restart_hint


def _protocol(applied: ProviderApply) -> str:
    return applied.connection.protocol if applied.connection is not None else "rollout"


def prove(probe: AuthProbe, applied: ProviderApply, accounts: Accounts, old: Secret,
          new: Secret, *, phase: str, deadline: Deadline) -> str:
    """provider.verify, from outside.  ``phase``:

    * ``"cut"`` (strategy restart): the new value is accepted and the old one refused;
    * ``"overlap"`` (phase 1): the new value is accepted and the old one still is;
    * ``"retired"`` (after retire): the new value is accepted and the old one refused.

    Retries until ``deadline`` (a rolled-out pod may need a moment behind its Service); then
    ProviderProofFailed with what was last seen and the likely cause.
    """
    want_old = phase == "overlap"
    last: list[Acceptance] = []

    def check() -> bool | None:
        seen = observe(probe, accounts, old, new)
        last[:] = [seen]
        return True if seen.new and seen.old == want_old else None

    try:
        wait_for(check, deadline=deadline, what=f"{applied.provider} accepts the new value")
    except WaitTimeout:
        seen = last[0] if last else None
        raise ProviderProofFailed(
            _protocol(applied), f"verify {applied.provider}",
            _proof_reason(seen, accounts, want_old), hint=hint_for(applied)) from None
    old_word = "still accepts" if want_old else "refuses"
    return (f"{accounts.new} accepts the new value from outside; {accounts.old} {old_word} "
            "the old one")


def prove_accepts(probe: AuthProbe, applied: ProviderApply, user: str, value: Secret, *,
                  refused: tuple[str, Secret] | None, deadline: Deadline) -> str:
    """A rollback's proof: ``user`` logs in with the restored ``value`` (and, with
    ``refused``, that account no longer accepts the value the rollback replaced)."""

    def check() -> bool | None:
        if not probe.accepts(user, value):
            return None
        if refused is not None and probe.accepts(*refused):
            return None
        return True

    try:
        wait_for(check, deadline=deadline, what=f"{applied.provider} accepts the restored value")
    except WaitTimeout:
        raise ProviderProofFailed(
            _protocol(applied), f"verify {applied.provider}",
            f"{user} does not accept the restored value" if refused is None else
            f"{user} does not accept the restored value, or the replaced one still works",
            hint=hint_for(applied)) from None
    tail = f"; {refused[0]} refuses the replaced one" if refused is not None else ""
    return f"{user} accepts the restored value from outside{tail}"


def _proof_reason(seen: Acceptance | None, accounts: Accounts, want_old: bool) -> str:
    if seen is None:
        return "unreachable until the deadline"
    if not seen.new:
        return f"{accounts.new} refuses the new value"
    if want_old:
        return f"{accounts.old} already refuses the old value (consumers not moved yet)"
    return f"{accounts.old} still accepts the old value"

"""Which strategy a credential's providers can run: the one rule behind exit 2 for "overlap
on a method that cannot hold two values", and the default when the chain file sets none.

Pure functions of the chain model and the method registry (rotate.chain.methods): the loader
applies them to the file's own ``strategy``, the engine to ``--strategy`` at run time, so
both refuse the same thing with the same words.
"""

from __future__ import annotations

from rotate.chain.methods import find_spec
from rotate.chain.model import Credential
from rotate.core.refs import ObjectRef
from rotate.core.strategy import Strategy


def strategy_problem(credential: Credential, strategy: str) -> str | None:
    """Why ``strategy`` cannot run on this credential's providers, or None when it can.

    The one rule behind exit 2 for "overlap on a method that cannot hold two values", used by
    the loader (the chain's own ``strategy``), at run time (``--strategy``) and for the
    default (:func:`default_strategy`):

    * ``rollout`` holds two values only through ``overlap.previousKey`` (the provider reads
      both keys of the Secret when it starts);
    * a method whose account holds two values (``MethodSpec.holds_two_values``: redis-acl)
      always can;
    * one whose account holds one (``postgres``) needs alternating users (``users: [a, b]``)
      when it declares them, and cannot overlap otherwise.
    """
    if strategy != "overlap":
        return None
    found = one_value_provider(credential)
    if found is None:
        return None
    ref, method, needs, why = found
    if method == "rollout":
        return (f"credential {credential.name!r}: strategy overlap needs {needs} for provider "
                f"{ref} (apply: rollout): {why}")
    if needs is not None:
        return (f"credential {credential.name!r}: strategy overlap on provider {ref} "
                f"(apply: {method}) needs {needs}: {why}")
    return (f"credential {credential.name!r}: strategy overlap on provider {ref} "
            f"(apply: {method}): {why}")


def one_value_provider(credential: Credential) -> tuple[ObjectRef, str, str | None, str] | None:
    """The first provider that cannot hold the old and the new value at once: (its ref, its
    method, what would let it — None when nothing can —, why), or None when every one can."""
    for ref in credential.providers:
        entry = credential.apply_of(ref)
        if entry.method == "rollout":
            if credential.overlap is None:
                return (ref, "rollout", "overlap.previousKey", "it can hold two values only by "
                        "reading the previous one from the Secret")
            continue
        spec = find_spec(entry.method)
        if (spec is None or spec.holds_two_values or entry.users is not None
                or entry.declares_two_values):
            continue  # an unavailable method is the loader's problem, not the strategy's
        if spec.alternating_users:
            return (ref, entry.method, "two alternating login roles (users: [a, b])",
                    spec.one_value)
        return ref, entry.method, None, "the method holds one value at a time"
    return None


def default_strategy(credential: Credential) -> tuple[Strategy, str]:
    """The strategy of a credential whose chain file does not set one, and why (one line for
    the plan): overlap when every provider holds two values — nobody is refused while the
    consumers move — and restart where one provider cannot."""
    found = one_value_provider(credential)
    if found is None:
        how = []
        for ref in credential.providers:
            entry = credential.apply_of(ref)
            how.append(entry.method + (" + users" if entry.users else "")
                       + (" + previousKey" if entry.method == "rollout" else ""))
        return (Strategy.overlap, "default overlap: every provider holds two values ("
                + ", ".join(dict.fromkeys(how)) + ")")
    ref, method, needs, _ = found
    tail = f" without {needs}" if needs is not None else ""
    return (Strategy.restart,
            f"default restart: {ref} (apply: {method}) holds one value{tail}")

"""The new value against what every provider of the credential can take (exit 2).

Each provider method declares the values it takes (:class:`~rotate.providers.method.
ValueRule`: length, bytes, alphabet, and why).  A value outside a rule would be written to
the backend and synced, then refused by the provider at ``provider.apply`` — and the
rollback of that run would have to present it to the provider again.  So the value is
checked before anything is contacted: a generated one by its ``generate`` settings (the
plan, too), a supplied one (``--value-stdin``) as it is.  The message names the provider,
its method and the rule, never the value.
"""

from __future__ import annotations

from rotate.chain.model import Credential
from rotate.core.errors import PermanentError, UsageError
from rotate.core.secret import Secret
from rotate.providers.registry import method_for


def check_new_value(credential: Credential, supplied: Secret | None, *,
                    source: str | None = None) -> None:
    """UsageError (exit 2, nothing changed) when the new value — ``supplied``, else one
    ``credential.generate`` makes — does not fit a provider's rule.  ``source``: where a
    supplied value comes from, when not stdin (``--adopt``: a backend version)."""
    problems: list[str] = []
    for ref in credential.providers:
        applied = credential.apply_of(ref)
        if not applied.live and applied.connection is None:
            continue  # apply: rollout without probe: rotate never talks to it
        try:
            rule = method_for(applied).values
        except PermanentError:
            continue  # no such method: preflight's provider.access names it (exit 3)
        reason = rule.refuses(supplied) if supplied is not None \
            else rule.problem(credential.generate)
        if reason is not None:
            how = applied.method if applied.live else f"probe {applied.connection.protocol}" \
                if applied.connection is not None else applied.method
            problems.append(f"provider {ref} ({how}): {reason}")
    if not problems:
        return
    fix = ("give a value that fits" if supplied is not None
           else f"change credentials.{credential.name}.generate in the chain file")
    if source is not None:
        fix = "write a value that fits to the backend, or rotate with a new value"
    source = source or ("the value given on stdin" if supplied is not None
                        else f"credentials.{credential.name}.generate")
    raise UsageError(f"{source} does not fit what the providers take: "
                     + "; ".join(problems) + f"; nothing was changed: {fix}")

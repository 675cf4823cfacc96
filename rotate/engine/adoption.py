"""``rotate CREDENTIAL --adopt``: what the backend holds that no rotate run wrote (cli.md).

The value the chain holds — the provider, the Secret, the consumers' documents — is the one
of W, the last version a rotate run wrote to the path: every rotate write (a rotation, its
retire, a rollback's restore) sets the path's ``rotate-version`` custom metadata to the
version it wrote (rotate.stages.backend), an adopt run sets it to the version it adopted
once the whole chain holds it (its ``backend.confirm``), and nobody else does — a ``bao kv
put`` by hand or the backend's own rotation adds a version and leaves custom metadata as it
was.  So:

* current version M == W, or M holds W's value (e.g. ``bao kv rollback`` to W): nothing to
  adopt — a no-op, exit 0, nothing runs;
* M > W with another value: the run carries M's value through the chain (``backend.adopt``
  in place of ``backend.write``: no new version), and its rollback writes W's data back;
* no ``rotate-version`` (no rotate run ever wrote the path): the value the chain holds is
  unknown, and so is the value to move the provider off (and, under overlap, to retire):
  refused (exit 3), nothing changed.

Checked before anything changes: M's value fits every provider's value rule (exit 2, as a
supplied value); with ``overlap.previousKey`` M holds at the previous key what a write
would have put there — under overlap W's value (the provider must keep accepting it while
the consumers move: a ``bao kv patch`` keeps it, a ``bao kv put`` of the key alone drops
it), under restart M's value itself (no stale value left valid); for alternating users M
names the role the run moves the consumers to (exit 3 otherwise).  Never a value in a
message.
"""

from __future__ import annotations

from rotate.chain.model import Credential
from rotate.clients.seams import Vault
from rotate.core.errors import ClientError, NotFoundError, PreflightFailed
from rotate.core.secret import Secret
from rotate.core.strategy import Strategy
from rotate.engine.model import Adoption
from rotate.engine.value_rules import check_new_value
from rotate.providers.accounts import accounts_for, active_username
from rotate.stages import backend


def _refused(credential: Credential, why: str, hint: str) -> PreflightFailed:
    return PreflightFailed(f"cannot adopt the backend's value of {credential.name}: {why}; "
                           "nothing was changed", hint=hint)


def _chain_version(vault: Vault, credential: Credential) -> tuple[int, int]:
    """(M, W): the current version and the last one a rotate run wrote."""
    path = credential.backend.path
    try:
        meta = vault.read_metadata(path)
    except NotFoundError:
        raise _refused(credential, f"{path} does not exist in the backend",
                       f"write it first, then `rotate {credential.name} --confirm`") from None
    written = meta.custom_metadata.get(backend.VERSION_META, "")
    if not written.isdigit() or int(written) < 1:
        raise _refused(credential, f"no rotate run ever wrote {path} (its custom metadata has "
                       f"no {backend.VERSION_META}), so the value the chain holds is unknown",
                       f"rotate it with a new value: `rotate {credential.name} --confirm`")
    chain_version, current = int(written), meta.current_version
    if chain_version > current:
        raise _refused(credential, f"its custom metadata names v{chain_version} as rotate's "
                       f"last write, beyond the current v{current}",
                       f"rotate it with a new value: `rotate {credential.name} --confirm`")
    return current, chain_version


def _previous_key(credential: Credential, strategy: Strategy, data: dict[str, Secret],
                  held: Secret, value: Secret, current: int, chain_version: int) -> None:
    """``overlap.previousKey`` of the adopted version, as a write would have set it: under
    overlap the chain's value (the provider keeps accepting the consumers still on it),
    under restart the adopted value itself (a hard cut leaves no stale value valid)."""
    assert credential.overlap is not None
    prev, key = credential.overlap.previous_key, credential.backend.key
    overlap = strategy == Strategy.overlap
    want, what = (held, f"the chain's value (v{chain_version}'s {key})") if overlap \
        else (value, f"the adopted value too (v{current}'s {key}: a hard cut-over leaves no "
                     "other value valid)")
    if data.get(prev) == want:
        return
    raise _refused(
        credential, f"under the {strategy} strategy v{current} must hold {what} as {prev}, "
        f"and it does not (a `bao kv put` of {key} alone drops {prev}; `bao kv patch` keeps "
        "it)", f"write {prev} accordingly with `bao kv patch`, then plan again; under "
        f"overlap {prev} keeps the chain's value, under `--strategy restart` it repeats {key}")


def adoption(vault: Vault, credential: Credential,
             strategy: Strategy) -> tuple[Adoption, Secret | None]:
    """What ``--adopt`` would carry, and the value (None: a no-op).  PreflightFailed (exit
    3) or UsageError (exit 2: a value a provider cannot take) before anything changes."""
    try:
        return _adoption(vault, credential, strategy)
    except ClientError as exc:
        raise _refused(credential, f"the backend could not be read ({exc.message})",
                       "check BAO_ADDR/VAULT_ADDR and the token, then plan again") from None


def _adoption(vault: Vault, credential: Credential,
              strategy: Strategy) -> tuple[Adoption, Secret | None]:
    path, key = credential.backend.path, credential.backend.key
    current, chain_version = _chain_version(vault, credential)
    if current == chain_version:
        return Adoption(current, chain_version, True,
                        f"v{current}, the current version of {path}, is the one rotate wrote "
                        "last: the chain already holds it"), None
    value = backend.read_value(vault, path, key, current)
    held = backend.read_value(vault, path, key, chain_version)
    if value == held:
        return Adoption(current, chain_version, True,
                        f"v{current} of {path} holds the value rotate wrote as "
                        f"v{chain_version}: the chain already holds it"), None
    check_new_value(credential, value, source=f"the backend's v{current} (--adopt)")
    if credential.overlap is not None:
        _previous_key(credential, strategy, vault.read(path, current), held, value,
                      current, chain_version)
    for ref in credential.providers:
        applied = credential.apply_of(ref)
        if applied.users is None or applied.username_key is None:
            continue
        before = active_username(vault, path, applied.username_key, chain_version)
        to = accounts_for(applied, str(strategy), before).new
        now = active_username(vault, path, applied.username_key, current)
        if (now or applied.users[0]) != to:
            raise _refused(
                credential, f"provider {ref} alternates users, and v{current} names role "
                f"{now or applied.users[0]!r} under {applied.username_key} where this "
                f"run would move the consumers to {to!r}",
                f"write {applied.username_key}={to} with the value (`bao kv patch`), or "
                f"rotate with a new value: `rotate {credential.name} --confirm`")
    return Adoption(current, chain_version, False,
                    f"v{current} of {path} was not written by rotate (its last write is "
                    f"v{chain_version}, which the chain holds): the run carries v{current}'s "
                    "value, no new version"), value

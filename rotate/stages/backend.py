"""Stage ①: the new value goes into OpenBao/Vault KV v2 with check-and-set.

Invariants:

* The write is ``cas=N`` where N is the version read just before: a concurrent writer makes
  it fail instead of being silently overwritten.
* Every other key of the path is kept: a KV version is a whole document, and a path often
  holds more than the rotated key (a username next to the password).
* Before writing, ``custom_metadata`` gets ``rotate-run-id`` and ``rotate-cas`` (the run id
  and N).  After a crash between the write and the journal, :func:`observe` recognises
  "version N+1 exists and was announced by this run" and the run never writes a second value.
* Rollback writes version N's data as a *new* version: history only grows.
* ``rotate-version`` names the last version rotate put in the chain: every write above sets
  it once the version exists, and so does :func:`adopt` (``--adopt``: a version someone else
  wrote, once carried through the whole chain); nobody else sets it, so a current version other than
  it holds a value no rotate run wrote (rotate.engine.adoption).
* Overlap strategy (chain.md "Strategies"): the path also holds a *previous key*.  Phase 1
  writes ``key := new, previous := the value key held at N`` so a provider that accepts both
  keeps every consumer working while they move; phase 2 (:func:`retire`) writes a version
  where ``previous := key``, so the old value is valid nowhere once the provider rolls again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rotate.clients.seams import Vault
from rotate.core.errors import ConflictError, NotFoundError, PermanentError
from rotate.core.secret import Secret

RUN_ID_META = "rotate-run-id"
CAS_META = "rotate-cas"
VERSION_META = "rotate-version"


@dataclass(frozen=True)
class BackendWrite:
    path: str
    key: str
    previous_version: int
    version: int


def current_version(vault: Vault, path: str) -> int:
    """The current version, 0 when the path was never written."""
    try:
        return vault.read_metadata(path).current_version
    except NotFoundError:
        return 0


def observe(vault: Vault, path: str, run_id: str, previous_version: int) -> int | None:
    """The version this run wrote, if it already did (current == N+1 announced by this run)."""
    try:
        meta = vault.read_metadata(path)
    except NotFoundError:
        return None
    if (
        meta.current_version == previous_version + 1
        and meta.custom_metadata.get(RUN_ID_META) == run_id
        and meta.custom_metadata.get(CAS_META, str(previous_version)) == str(previous_version)
    ):
        return meta.current_version
    return None


def _write_over(
    vault: Vault, path: str, data: dict[str, Secret], run_id: str, cas: int, what: str
) -> int:
    vault.set_custom_metadata(path, {RUN_ID_META: run_id, CAS_META: str(cas)})
    version = vault.write(path, data, cas=cas)
    meta = vault.read_metadata(path)
    if meta.current_version != version or version != cas + 1:
        raise ConflictError(
            "vault", f"{what} {path}",
            f"read-back shows version {meta.current_version}, expected {cas + 1}",
        )
    vault.set_custom_metadata(path, {VERSION_META: str(version)})
    return version


def write(
    vault: Vault, path: str, key: str, value: Secret, run_id: str, *, expected_version: int | None,
    previous_key: str | None = None, keep_previous: bool = True,
    also: Mapping[str, Secret] | None = None,
) -> BackendWrite:
    """Write ``value`` at ``key`` as version N+1 (cas=N), keeping the other keys.

    ``also``: more keys set in the same version, e.g. the active role's name of PostgreSQL
    alternating users (``usernameKey``), so the username and the password change together.

    ``expected_version`` is the N the plan showed; if the path moved since, refuse rather
    than rotate on top of someone else's change.  With ``previous_key``, that key gets the
    value ``key`` held at N (``keep_previous``: overlap phase 1) or the new value too (a hard
    cut-over must not leave a stale previous value valid); a first write uses the new value.
    """
    n = current_version(vault, path)
    if expected_version is not None and n != expected_version:
        raise ConflictError(
            "vault", f"write {path}",
            f"version moved from {expected_version} to {n} since the plan",
        )
    data: dict[str, Secret] = dict(vault.read(path, n)) if n > 0 else {}
    if previous_key is not None:
        old = data.get(key)
        data[previous_key] = old if keep_previous and old is not None else value
    data.update(also or {})
    data[key] = value
    version = _write_over(vault, path, data, run_id, n, "write")
    return BackendWrite(path, key, n, version)


def adopt(vault: Vault, path: str, run_id: str, version: int) -> None:
    """``--adopt``: version ``version``, which no rotate run wrote, becomes the one rotate
    put in the chain — ``rotate-version`` (and ``rotate-run-id``) name it, as after a write,
    so the next ``--adopt`` finds nothing to adopt.  No version is written."""
    vault.set_custom_metadata(path, {RUN_ID_META: run_id, VERSION_META: str(version)})


def read_value(vault: Vault, path: str, key: str, version: int) -> Secret:
    """The value of ``key`` at ``version`` (resume re-reads the value the run wrote)."""
    data = vault.read(path, version)
    if key not in data:
        raise PermanentError("vault", f"read {path} v{version}", f"key {key!r} is absent")
    return data[key]


def restore(
    vault: Vault, path: str, key: str, old_version: int, run_id: str, *,
    previous_key: str | None = None,
) -> BackendWrite:
    """Write version ``old_version``'s data as a new version (cas = current).

    With ``previous_key`` (rollback of an overlap run) the value being replaced stays valid
    as the previous one, so the rollback itself is an overlap: nobody is cut off while the
    consumers move back; a later :func:`retire` removes it.
    """
    n = current_version(vault, path)
    if old_version < 1:
        raise PermanentError(
            "vault", f"restore {path}", "the run created the path; nothing to restore")
    data = dict(vault.read(path, old_version))
    if previous_key is not None and n > 0:
        replaced = vault.read(path, n).get(key)
        if replaced is not None:
            data[previous_key] = replaced
    version = _write_over(vault, path, data, run_id, n, "restore")
    return BackendWrite(path, key, n, version)


def retire(
    vault: Vault, path: str, key: str, previous_key: str, run_id: str, *, expected_version: int
) -> BackendWrite:
    """Overlap phase 2: a new version whose ``previous_key`` holds ``key``'s value.

    ``expected_version`` is the version this run wrote in phase 1; anything newer is someone
    else's write, and retiring on top of it could invalidate a value we never saw.
    """
    n = current_version(vault, path)
    if n != expected_version:
        raise ConflictError("vault", f"retire {path}",
                            f"version moved from {expected_version} to {n} since this run "
                            "wrote it")
    data = dict(vault.read(path, n))
    if key not in data:
        raise PermanentError("vault", f"retire {path} v{n}", f"key {key!r} is absent")
    data[previous_key] = data[key]
    version = _write_over(vault, path, data, run_id, n, "retire")
    return BackendWrite(path, key, n, version)

"""What the backend held before the value it holds now, for ``rotate status``'s backend link
(rotate.engine.status_links): the value the current one replaced (the retired one), since
when the current value is held, and when it was held before a run that was rolled back.

Read-only: at most :data:`RETIRED_LOOKBACK` old versions and the ExternalSecret's last sync,
read at once.  Values are compared by their keyed digests (rotate.core.fingerprint.Comparer),
never printed; a version that cannot be read ends the look back rather than failing the link.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING

from rotate.chain.model import Credential
from rotate.core.errors import ClientError
from rotate.core.secret import Secret
from rotate.core.timestamps import parse_rfc3339

if TYPE_CHECKING:
    from rotate.clients.seams import Kube, KvMetadata, Vault

#: how many versions back the value the current one replaced is looked for
RETIRED_LOOKBACK = 5


def backend_history(vault: Vault, kube: Kube, cred: Credential, meta: KvMetadata, version: int,
                    written: datetime, key_of: Callable[[Secret], bytes], value_key: bytes,
                    workers: int) -> tuple[Secret | None, int | None, datetime,
                                           tuple[datetime, datetime] | None]:
    """Looking at most RETIRED_LOOKBACK versions back: the latest one holding another
    value (the retired one; an overlap's retire writes the same value again), since
    when the backend holds the current value, and when it held it before the versions
    with another value (a run rolled back) — (from, until), or None.  A version with
    another value created after the ExternalSecret's last sync never reached the
    Secret, so the value held before it still counts (a ``bao kv put`` put back with
    ``bao kv rollback``)."""
    back = [v for v in range(version - 1, max(0, version - 1 - RETIRED_LOOKBACK), -1)
            if (info := meta.versions.get(v)) is not None
            and not info.deletion_time and not info.destroyed]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rotate-status") as pool:
        synced = pool.submit(_last_sync, kube, cred)  # the reads at once: ~6 round trips → 1
        olds = list(pool.map(lambda v: _old_value(vault, cred, v), back))
        refresh = synced.result()
    retired: Secret | None = None
    retired_version: int | None = None
    since = written
    other: datetime | None = None  # the oldest version of the other value(s), once seen
    before: tuple[datetime, datetime] | None = None
    for v, old in zip(back, olds, strict=True):
        try:
            created = parse_rfc3339(meta.versions[v].created_time)
        except ValueError:
            break
        if old is None:
            break
        same = key_of(old) == value_key
        if other is not None:  # past the current run of versions: the one before it
            if same:
                before = (created, before[1] if before is not None else other)
                continue
            if before is not None:
                break
            other = created
            continue
        if same:
            since = created
            continue
        if retired is None:
            retired, retired_version = old, v
        if refresh is None or refresh >= created.replace(microsecond=0):
            other = created  # the ExternalSecret may have copied it: held since `since`
    return retired, retired_version, since, before


def _old_value(vault: Vault, cred: Credential, version: int) -> Secret | None:
    try:
        data: dict[str, Secret] = vault.read(cred.backend.path, version)
    except ClientError:
        return None
    return data.get(cred.backend.key)


def _last_sync(kube: Kube, cred: Credential) -> datetime | None:
    """The credential's ExternalSecret's last sync (None: unknown)."""
    es = cred.external_secret
    try:
        obj = kube.get("ExternalSecret", es.namespace, es.name)
        text = str((obj.get("status") or {}).get("refreshTime") or "")
        return parse_rfc3339(text) if text else None
    except (ClientError, ValueError):
        return None

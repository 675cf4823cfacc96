"""Run journals kept in the cluster: one ConfigMap per run in the lock namespace (the
:class:`~rotate.clients.journal_seam.JournalStore` seam over :class:`~rotate.clients.seams.Kube`).

Why a ConfigMap (docs/design.md "Where the journal lives"): every API server serves it, RBAC
can name it, ``kubectl get cm -l rotate.dev/journal=run`` shows it, and a PUT naming the
``resourceVersion`` read is the optimistic concurrency the journal needs — no CRD to install
and no controller to run.

Layout of run ``R``:

* ``rotate-run-<r>`` (``r``: ``R`` lower-cased, as names must be) — the *head*: labels
  ``rotate.dev/journal=run`` and ``cred.rotate.dev/<credential>=true`` per credential (when
  the name fits a label key); annotations ``rotate.dev/run-id`` (``R`` exactly),
  ``rotate.dev/credentials``, ``rotate.dev/bytes`` (the journal's length) and
  ``rotate.dev/parts``; ``data["journal.jsonl"]``: the journal's first :data:`PART_BYTES`.
* ``rotate-run-<r>-part-<k>`` (``k`` ≥ 1, label ``rotate.dev/journal=part``) — the next
  :data:`PART_BYTES` each: an object is limited to 1 MiB, a long run's journal is not.

Invariants: the head is written last and only conditionally (its ``resourceVersion`` is the
journal's version), so a reader trusts exactly ``rotate.dev/bytes`` of the parts' content; a
part is written only when its content changed.  Writers of one run are serialised by the
run's Lease; the precondition makes a writer that lost it fail (ConflictError) instead of
overwriting.  Bytes travel as Latin-1 text: the journal is ASCII (JSON with ``ensure_ascii``)
and Latin-1 maps any other byte — a torn tail — to one character and back, so the stored
copy is byte for byte the journal.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from rotate.clients.journal_seam import StoredJournal
from rotate.clients.seams import Kube
from rotate.core.errors import ConflictError, NotFoundError

#: bytes of journal per object: half the 1 MiB object limit, with room for any byte that is
#: not ASCII (two bytes once stored as UTF-8) and for the metadata
PART_BYTES = 512 * 1024
KEY = "journal.jsonl"
JOURNAL_LABEL = "rotate.dev/journal"
CREDENTIAL_LABEL = "cred.rotate.dev/"
RUN_ID = "rotate.dev/run-id"
CREDENTIALS = "rotate.dev/credentials"
BYTES = "rotate.dev/bytes"
PARTS = "rotate.dev/parts"
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def head_name(run_id: str) -> str:
    """The head ConfigMap's name: a DNS-1123 subdomain made from the run id."""
    raw = "rotate-run-" + run_id.lower()
    return "".join(c if c.isalnum() or c in "-." else "-" for c in raw)[:230].rstrip("-.")


def part_name(run_id: str, k: int) -> str:
    return f"{head_name(run_id)}-part-{k}"


def _decode(text: str) -> bytes:
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:  # edited by hand with characters Latin-1 lacks
        return text.encode("utf-8")


class ClusterJournals:
    """Run journals as ConfigMaps in ``namespace`` (the chain file's ``lockNamespace``)."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        #: run id → (version, parts) as last read or written here: unchanged parts are skipped
        self._known: dict[str, tuple[str, list[bytes]]] = {}

    @property
    def where(self) -> str:
        return f"ConfigMaps in namespace {self.namespace}"

    # ------------------------------------------------------------------ read

    def journals(self, credential: str | None = None) -> list[StoredJournal]:
        selector = f"{JOURNAL_LABEL}=run"
        if credential is not None and _LABEL_NAME.match(credential):
            selector += f",{CREDENTIAL_LABEL}{credential}=true"
        out = []
        for head in self.kube.list("ConfigMap", self.namespace, label_selector=selector):
            stored = self._assemble(head)
            if stored is not None and (credential is None or credential in stored.credentials):
                out.append(stored)
        return out

    def read(self, run_id: str) -> StoredJournal:
        head = self.kube.get("ConfigMap", self.namespace, head_name(run_id))
        stored = self._assemble(head)
        if stored is None or stored.run_id != run_id:
            raise NotFoundError("kubernetes", f"read the journal of run {run_id}", "not found")
        return stored

    def _assemble(self, head: dict[str, Any]) -> StoredJournal | None:
        meta = head.get("metadata") or {}
        ann = meta.get("annotations") or {}
        run_id = str(ann.get(RUN_ID) or "")
        if not run_id:
            return None
        parts = [_decode(str((head.get("data") or {}).get(KEY) or ""))]
        for k in range(1, int(ann.get(PARTS) or 1)):
            part = self.kube.get("ConfigMap", self.namespace, part_name(run_id, k))
            parts.append(_decode(str((part.get("data") or {}).get(KEY) or "")))
        text = b"".join(parts)[:int(ann.get(BYTES) or 0)]
        version = str(meta.get("resourceVersion") or "")
        self._known[run_id] = (version, _split(text))
        creds = tuple(c for c in str(ann.get(CREDENTIALS) or "").split(",") if c)
        return StoredJournal(run_id, text, version, creds)

    # ------------------------------------------------------------------ write

    def write(self, run_id: str, text: bytes, *, credentials: tuple[str, ...],
              version: str | None) -> str:
        parts = _split(text)
        known_version, known = self._known.get(run_id, ("", []))
        same = version is not None and version == known_version
        for k in range(1, len(parts)):
            if not (same and k < len(known) and known[k] == parts[k]):
                self._put_part(run_id, k, parts[k])
        body = self._head(run_id, parts[0], credentials, len(text), len(parts))
        if version is None:
            done = self.kube.create("ConfigMap", self.namespace, body)
        else:
            body["metadata"]["resourceVersion"] = version
            done = self.kube.replace("ConfigMap", self.namespace, head_name(run_id), body)
        new = str((done.get("metadata") or {}).get("resourceVersion") or "")
        self._known[run_id] = (new, parts)
        for k in range(len(parts), len(known)):  # a shorter journal (never by rotate itself)
            self._delete(part_name(run_id, k))
        return new

    def _head(self, run_id: str, first: bytes, credentials: tuple[str, ...], size: int,
              parts: int) -> dict[str, Any]:
        labels = {"app.kubernetes.io/managed-by": "rotate", JOURNAL_LABEL: "run"}
        labels.update({f"{CREDENTIAL_LABEL}{c}": "true" for c in credentials
                       if _LABEL_NAME.match(c)})
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": head_name(run_id), "namespace": self.namespace,
                             "labels": labels,
                             "annotations": {RUN_ID: run_id, CREDENTIALS: ",".join(credentials),
                                             BYTES: str(size), PARTS: str(parts)}},
                "data": {KEY: first.decode("latin-1")}}

    def _put_part(self, run_id: str, k: int, chunk: bytes) -> None:
        name = part_name(run_id, k)
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": self.namespace,
                             "labels": {"app.kubernetes.io/managed-by": "rotate",
                                        JOURNAL_LABEL: "part"},
                             "annotations": {RUN_ID: run_id}},
                "data": {KEY: chunk.decode("latin-1")}}
        try:
            self.kube.replace("ConfigMap", self.namespace, name, body)
        except NotFoundError:
            try:
                self.kube.create("ConfigMap", self.namespace, body)
            except ConflictError:  # created meanwhile: ours is the content that counts
                self.kube.replace("ConfigMap", self.namespace, name, body)

    # ------------------------------------------------------------------ delete

    def delete(self, run_id: str) -> None:
        """The head first (a reader then no longer finds the run), then its parts."""
        try:
            head = self.kube.get("ConfigMap", self.namespace, head_name(run_id))
        except NotFoundError:
            return
        parts = int(((head.get("metadata") or {}).get("annotations") or {}).get(PARTS) or 1)
        self._delete(head_name(run_id))
        for k in range(1, parts):
            self._delete(part_name(run_id, k))
        self._known.pop(run_id, None)

    def _delete(self, name: str) -> None:
        with contextlib.suppress(NotFoundError):
            self.kube.delete("ConfigMap", self.namespace, name)


def _split(text: bytes) -> list[bytes]:
    return [text[i:i + PART_BYTES] for i in range(0, len(text), PART_BYTES)] or [b""]

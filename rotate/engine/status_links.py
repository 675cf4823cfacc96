"""The links of ``rotate status`` (rotate.engine.status) and their checks, one method per kind
of link.

Observe only: GETs, lists, logins from outside and readyz GETs.  Each check catches the
:class:`ClientError` of its own reads and reports the link broken with the error's safe
message ("cannot read …"), so one unreachable object never hides the others.

Speed (docs/performance.md, ``bench/status.py``): the backend is read first (everything is
compared with its value), then every ExternalSecret, provider, consumer and reader is checked
as one task on a pool of :data:`WORKERS` threads; the pods and the workloads of a namespace
are listed once and shared (:class:`~rotate.engine.status_model.Listed`), the sources of the
expected documents read once (:class:`~rotate.stages.harvest.SharedReads`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from rotate.chain.model import Chain, Credential, ProviderApply, SecretKeyRef, SecretKeySource
from rotate.core.errors import ClientError
from rotate.core.fingerprint import Comparer, shown
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from rotate.core.timestamps import parse_rfc3339, rfc3339
from rotate.engine.fanout import FAN_OUT
from rotate.engine.status_history import backend_history
from rotate.engine.status_model import Current, Link, Listed, age_words, pods_since
from rotate.engine.targets import backend_target, parse_workload, workload_ref

#: threads the checks run on: preflight's fan-out, whose 8 measured best at 100 consumers
#: (the client side is CPU under one GIL: 16 was slower, docs/performance.md)
WORKERS = FAN_OUT


class Checker:
    """The checks of one credential, sharing its reads (the backend's value, pod lists)."""

    def __init__(self, chain: Chain, cred: Credential, adapters: Any,
                 environ: Mapping[str, str], writes: Mapping[tuple[str, int], datetime],
                 clock: Callable[[], datetime]) -> None:
        from rotate.stages.harvest import SharedReads

        self.chain, self.cred, self.a, self.environ = chain, cred, adapters, environ
        self.writes, self.clock = writes, clock
        self.path = backend_target(chain, cred)
        self.compare = Comparer()
        self.listed = Listed(adapters.kube)
        self.sources = SharedReads(adapters.kube)
        self.cur: Current | None = None
        self._value_key = b""
        self._lock = threading.Lock()
        self._shown: dict[bytes, str] = {}

    # ---------------------------------------------------------------- ① backend

    def backend(self) -> Link:
        """Read the current version and value (and the one it replaced)."""
        vault, path, key = self.a.vault, self.cred.backend.path, self.cred.backend.key
        try:
            meta = vault.read_metadata(path)
            version = meta.current_version
            data = vault.read(path, version)
        except ClientError as exc:
            return Link("backend", self.path, False, f"cannot read it: {exc.message}")
        value = data.get(key)
        if value is None or version < 1:
            return Link("backend", self.path, False, f"v{version} has no key {key}")
        info = meta.versions.get(version)
        try:
            written = parse_rfc3339(info.created_time) if info is not None else self.clock()
        except ValueError:
            written = self.clock()
        self._value_key = self.compare.of(value)
        # what it held before (rotate.engine.status_history)
        retired, retired_version, since, before = backend_history(
            vault, self.a.kube, self.cred, meta, version, written, self.compare.of,
            self._value_key, WORKERS)
        previous = self.cred.overlap.previous_key if self.cred.overlap else None
        held = data.get(previous) if previous else None
        open_ = held is not None and self.compare.of(held) != self._value_key
        self.cur = Current(version, written, value, retired, retired_version, open_, since,
                           before)
        held_since = (f" (the value held since {rfc3339(since, micro=False)})"
                      if since < written else "")
        return Link("backend", self.path, True,
                    f"v{version}, written {rfc3339(written, micro=False)}{held_since}, "
                    f"fingerprint {self.shown(value)}")

    def shown(self, value: Secret) -> str:
        """The printed fingerprint, computed once per value (scrypt: ~50 ms each)."""
        key = self.compare.of(value)
        with self._lock:
            known = self._shown.get(key)
        if known is None:
            known = shown(value, self.path)
            with self._lock:
                self._shown[key] = known
        return known

    def same(self, value: Secret | None) -> bool:
        return value is not None and self.compare.of(value) == self._value_key

    @property
    def current(self) -> Current:
        assert self.cur is not None, "backend() first"
        return self.cur

    # ---------------------------------------------------------------- ② sync

    def external_secret(self, es: ObjectRef, secret: SecretKeyRef) -> list[Link]:
        """The Secret's link, then the ExternalSecret's: Ready, and synced since the current
        version was written — or, synced before, its Secret already holds that version's
        value (the same data written again, a version put back by hand)."""
        cur, kube = self.current, self.a.kube
        where = f"{secret.namespace}/{secret.name}#{secret.key}"
        sec_link: Link | None = None
        held: Secret | None = None
        try:
            held = kube.read_secret_key(secret.namespace, secret.name, secret.key)
        except ClientError as exc:
            sec_link = Link("secret", where, False, f"cannot read it: {exc.message}")
        try:
            obj = kube.get("ExternalSecret", es.namespace, es.name)
        except ClientError as exc:
            es_link, synced = Link("externalsecret", es.short, False,
                                   f"cannot read it: {exc.message}"), "unread"
        else:
            es_link, synced = self._synced(es, obj, self.same(held))
        if sec_link is None:
            if held is None:
                sec_link = Link("secret", where, False, "the key is absent")
            elif self.same(held):
                sec_link = Link("secret", where, True,
                                f"fingerprint {self.shown(held)} = backend v{cur.version}")
            else:
                sec_link = Link("secret", where, False,
                                f"fingerprint {self.shown(held)} ≠ backend v{cur.version}'s "
                                f"{self.shown(cur.value)} (ExternalSecret {es.short} {synced})")
        return [sec_link, es_link]

    def _synced(self, es: ObjectRef, obj: Mapping[str, Any], holds: bool) -> tuple[Link, str]:
        from rotate.stages.sync import ready_condition

        cur = self.current
        cond = ready_condition(obj) or {}
        refresh = str((obj.get("status") or {}).get("refreshTime") or "")
        ready = cond.get("status") == "True" and cond.get("reason") == "SecretSynced"
        try:
            fresh = bool(refresh) and parse_rfc3339(refresh) >= cur.written_at.replace(
                microsecond=0)
        except ValueError:
            fresh = False
        synced = f"last synced {refresh}" if refresh else "never synced"
        words = (f"Ready={cond.get('status', 'absent')} reason={cond.get('reason', '-')}, "
                 f"{synced}")
        if not fresh:
            words += (f", before v{cur.version} was written"
                      + (", whose value its Secret holds" if holds else ""))
        if cond.get("status") == "False":
            words += f": {cond.get('message', 'no message')}"
        return Link("externalsecret", es.short, ready and (fresh or holds), words), synced

    # ---------------------------------------------------------------- ③ provider

    def provider(self, ref: ObjectRef) -> list[Link]:
        applied = self.cred.apply_of(ref)
        if applied.connection is None:
            if applied.live:
                return [Link("provider", str(ref), True,
                             f"apply: {applied.method} has no login from outside; its own "
                             "test phase proves it during a run")]
            return [self._workload_pods("provider", ref, self.current.value_since,
                                        "the backend held the value")]
        try:
            return self._probe(applied)
        except ClientError as exc:
            return [Link("provider", str(ref), False, f"cannot log in: {exc.message}")]

    def _probe(self, applied: ProviderApply) -> list[Link]:
        from rotate.providers import access
        from rotate.providers.accounts import accounts_for, active_username

        cur, ref = self.current, str(applied.provider)
        found = access.reach(self.a.providers, self.a.kube, applied, self.environ)

        def role(version: int | None) -> str:
            active = (active_username(self.a.vault, self.cred.backend.path,
                                      applied.username_key, version)
                      if applied.username_key and version else None)
            return accounts_for(applied, "restart", active).new

        user = role(cur.version)
        if found.method.values.refuses(cur.value) is not None:
            links = [Link("provider", ref, False, "the current value is one it cannot take "
                          "(its method's value rule)")]
        else:
            ok = found.probe.accepts(user, cur.value)
            links = [Link("provider", ref, ok, f"{found.protocol} login as {user} from outside: "
                          f"the current value {'accepted' if ok else 'refused'}")]
        if cur.retired is None:
            return links
        old_user = role(cur.retired_version)
        accepted = (found.method.values.refuses(cur.retired) is None
                    and found.probe.accepts(old_user, cur.retired))
        what = f"{old_user} with v{cur.retired_version}'s value"
        if cur.overlap_open:
            links.append(Link("provider.retired", ref, True,
                              f"{what} {'still accepted' if accepted else 'refused'}: the "
                              "overlap is open (the previous key still holds it)"))
        else:
            links.append(Link("provider.retired", ref, not accepted,
                              f"{what} {'still accepted' if accepted else 'refused'}"))
        return links

    def _workload_pods(self, link: str, ref: ObjectRef, since: datetime, what: str,
                       before: tuple[datetime, datetime] | None = None) -> Link:
        try:
            obj = self.listed.workload(ref.kind, ref.namespace, ref.name)
            ok, words = pods_since(self.listed.pods_of(obj), since, what, before)
        except ClientError as exc:
            return Link(link, str(ref), False, f"cannot read it: {exc.message}")
        return Link(link, str(ref), ok, words)

    # ---------------------------------------------------------------- ④ consumers

    def consumer(self, name: str) -> list[Link]:
        from rotate.stages.readyz import target_for

        svc = self.chain.services[name]
        doc_link, written = self._document(name)
        since, what = written
        token_link, minted = self._token(name)
        if minted is not None and minted > since:
            since, what = minted, "its live token was minted"
        # the document and the token no newer than the value: its pods may be from before a
        # rolled-back excursion to another value (a canary's run never moved it)
        earlier = self.current.held_before if since == self.current.value_since else None
        pods = self._workload_pods("consumer.pods", workload_ref(svc), since, what, earlier)
        target = target_for(svc)
        try:
            status = self.a.readyz.status(target)
            ready = Link("consumer.readyz", str(target), status == 200, f"HTTP {status}")
        except ClientError as exc:
            ready = Link("consumer.readyz", str(target), False, exc.message)
        return [doc_link, pods, ready, token_link]

    def _document(self, name: str) -> tuple[Link, tuple[datetime, str]]:
        from rotate.stages import documents, harvest

        svc, cur = self.chain.services[name], self.current
        where = f"{svc.namespace}/{name} {svc.config_key}"
        lower = (cur.value_since, "the backend held the value")
        try:
            doc = self.a.config_center.get_key(name, svc.config_key)
        except ClientError as exc:
            return Link("consumer.document", where, False, f"cannot read it: {exc.message}"), lower
        values, problems = harvest.resolve(self.sources, svc, {self.cred.secret: cur.value})
        if problems:
            return Link("consumer.document", where, False,
                        f"cannot build the expected document: {problems[0]}"), lower
        expected, _ = harvest.build(name, values)
        pointers = documents.owned_pointers(svc, self.cred.secret)
        differ = documents.moved(pointers, documents.owned_values(expected, pointers),
                                 documents.owned_values(doc.value, pointers))
        at = self.writes.get((name, doc.version))
        written = (at, f"v{doc.version} was written") if at is not None else lower
        if not differ:
            return Link("consumer.document", where, True,
                        f"v{doc.version} holds fingerprint {self.shown(cur.value)} at "
                        f"{', '.join(pointers)}"), written
        held = self._held(svc.values, doc.value, differ)
        return Link("consumer.document", where, False,
                    f"v{doc.version}: {', '.join(differ)} not the backend's v{cur.version}"
                    + (f" (fingerprint {held} ≠ {self.shown(cur.value)})" if held else "")
                    ), written

    def _held(self, sources: Mapping[str, Any], doc: Mapping[str, Any],
              differ: list[str]) -> str:
        """The fingerprint of what the document holds at the first differing pointer that is
        the credential's key itself ("" when none is)."""
        from rotate.stages.documents import owned_values

        key = self.cred.secret
        for pointer in differ:
            src = sources.get(pointer)
            if isinstance(src, SecretKeySource) and src.secret == key:
                value = owned_values(doc, [pointer]).get(pointer)
                if isinstance(value, str):
                    return self.shown(Secret(value))
        return ""

    def _token(self, name: str) -> tuple[Link, datetime | None]:
        from rotate.stages.rollout import meta_annotations
        from rotate.stages.tokens import TOKEN_ID_ANNOTATION

        svc = self.chain.services[name]
        secret = f"{svc.token.namespace}/{svc.token.name}"
        try:
            live = [t for t in self.a.config_center.list_tokens(name) if not t.revoked]
            obj = self.a.kube.get("Secret", svc.token.namespace, svc.token.name)
        except ClientError as exc:
            return Link("consumer.token", name, False, f"cannot read it: {exc.message}"), None
        held = meta_annotations(obj).get(TOKEN_ID_ANNOTATION)
        minted = None
        if len(live) == 1:
            try:
                minted = parse_rfc3339(live[0].created_at)
            except ValueError:
                minted = None
        if len(live) != 1:
            ids = ", ".join(t.id for t in live) or "none"
            return Link("consumer.token", name, False,
                        f"{len(live)} live tokens ({ids}), one expected"), minted
        if held and held != live[0].id:
            return Link("consumer.token", name, False,
                        f"the live token is {live[0].id}, Secret {secret} holds {held}"), minted
        return Link("consumer.token", name, True,
                    f"1 live token {live[0].id}" + (f", the one Secret {secret} holds"
                                                    if held else "")), minted

    # ---------------------------------------------------------------- readers, age

    def reader(self, ref: str, action: str, words: str) -> list[Link]:
        from rotate.stages.secret_readers import RESTART

        if action != RESTART:
            return [Link("reader.pods", ref, True, words)]
        cur = self.current
        return [self._workload_pods("reader.pods", parse_workload(ref), cur.value_since,
                                    "the backend held the value", cur.held_before)]

    def age(self) -> tuple[Link, float, float | None]:
        cur = self.current
        seconds = max(0.0, (self.clock() - cur.value_since).total_seconds())
        limit = self.cred.max_age or self.chain.notify.max_age
        if limit is None:
            return (Link("value.age", self.path, True, f"{age_words(seconds)} old; no maxAge set"),
                    seconds, None)
        return (Link("value.age", self.path, seconds <= limit,
                     f"{age_words(seconds)} old, maxAge {age_words(limit)}"), seconds, limit)

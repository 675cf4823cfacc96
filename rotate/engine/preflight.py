"""Preflight: everything that can be known before changing anything (chain.md, exit 3).

Every check runs even when an earlier one failed, so the operator gets the whole list at
once; each check catches only :class:`ClientError` (translated, safe to print).  The
candidate value is used to validate every consumer document *before* it is written —
the value itself is never shown, only the problems (service, path, reason).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rotate.chain.model import Chain, Credential, ProviderApply
from rotate.chain.strategy_rules import strategy_problem
from rotate.chain.value_graph import consumers_of
from rotate.clients.seams import ConfigCenter, Kube, Vault
from rotate.core.errors import ForbiddenError, NotFoundError
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from rotate.core.strategy import Strategy
from rotate.core.urls import display_url
from rotate.engine.access import check_permissions, check_vault_capabilities, permissions_needed
from rotate.engine.collector import Collector, Fanned, note_uid
from rotate.engine.fanout import fan_out
from rotate.engine.kinds.checks import BACKEND_CAPABILITIES, BACKEND_REACHABLE, BACKEND_TOKEN
from rotate.engine.model import Adapters, Check, PreflightResult, Trap
from rotate.engine.preflight_workloads import workload_findings
from rotate.engine.vault_token import describe_token, explain_forbidden
from rotate.providers import access as provider_access
from rotate.providers.accounts import accounts_for, active_username
from rotate.stages import backend, harvest, sync, tokens, traps

#: one thread per part of :func:`preflight`; 1 runs them one after the other
#: (``bench/plan_rtt.py`` compares the two)
PART_THREADS = 5


def preflight(
    chain: Chain, credential: Credential, adapters: Adapters, *, strategy: Strategy,
    candidate: Secret, environ: Mapping[str, str] | None = None,
    held_version: int | None = None,
) -> PreflightResult:
    """Every check of chain.md "Preflight", observe only.

    ``held_version``: the backend version whose value the chain holds, when it is not the
    current one (``--adopt``: the current version is the one to adopt; the providers' admin
    still authenticates with the value of the version rotate wrote last).

    The parts — the backend and the providers' access, the sync objects, the workloads, the
    Config Center, the documents — read nothing another part writes, so they run at once,
    each on a thread of its own: the plan waits for the slowest part, not for their sum
    (about ten round trips one after the other).  Their checks and traps are
    put together in this fixed order whatever order they finish in, so the plan reads the
    same every time.  Objects read by two parts (the ExternalSecret, the workloads) record
    their uids under one key each, so the parts share ``uids``.
    """
    head, overlap = _strategy(credential, strategy)
    kube = adapters.kube
    consumers = consumers_of(chain, credential.name)
    uids: dict[ObjectRef, str] = {}  # objects read here: the run's events need no GET of them
    with ThreadPoolExecutor(max_workers=PART_THREADS,
                            thread_name_prefix="rotate-preflight-part") as pool:
        backend_f = pool.submit(_backend_and_access, chain, credential, adapters, strategy,
                                environ or {}, held_version)
        sync_f = pool.submit(_sync_objects, chain, credential, kube, overlap, uids,
                             environ or {})
        workloads_f = pool.submit(workload_findings, chain, credential, kube, consumers, uids)
        cc_f = pool.submit(_config_center, chain, adapters.config_center, consumers)
        docs_f = pool.submit(_documents, chain, credential, kube, consumers, candidate)
        (backend_col, access_col, version), sync_col = backend_f.result(), sync_f.result()
        workloads, (cc_col, config_versions, token_ids) = workloads_f.result(), cc_f.result()
        docs_col = docs_f.result()
    parts = (head, backend_col, sync_col, access_col, workloads.found, cc_col, docs_col)
    return PreflightResult(
        checks=tuple(c for part in parts for c in part.checks),
        traps=tuple(t for part in parts for t in part.traps), current_version=version,
        consumers=consumers, config_versions=config_versions, token_ids=token_ids,
        reloader=workloads.reloader, ondelete=tuple(workloads.ondelete),
        no_surge=workloads.no_surge,
        thinned={ref: note for ref, note in workloads.thinned.items() if note},
        unprobed=tuple(workloads.unprobed), uids=uids, readers=workloads.readers,
        reader_restarts=workloads.reader_restarts,
        external_secrets=workloads.external_secrets,
    )


def _strategy(credential: Credential, strategy: Strategy) -> tuple[Collector, bool]:
    """The ``strategy`` check, and whether the run overlaps with a previous key."""
    col = Collector()
    overlap = strategy == Strategy.overlap
    live_overlap = overlap and credential.overlap is None and credential.live_applies != () \
        and strategy_problem(credential, "overlap") is None
    if live_overlap:
        col.add("strategy", True, "overlap (the providers hold two values live: "
                + ", ".join(f"{a.provider} {a.method}" for a in credential.live_applies) + ")")
    elif overlap and credential.overlap is None:
        col.add("strategy", False,
                f"overlap needs credentials.{credential.name}.overlap.previousKey in the chain "
                "file (the key that keeps the previous value, in Vault and in the Secret); "
                "without it the provider cannot accept two values: use --strategy restart")
        overlap = False
    elif overlap and credential.overlap is not None:
        col.add("strategy", True,
                f"overlap (previous value kept in {credential.overlap.previous_key})")
    else:
        col.add("strategy", True, strategy)
    return col, overlap


def _backend_and_access(
    chain: Chain, credential: Credential, adapters: Adapters, strategy: Strategy,
    environ: Mapping[str, str], held_version: int | None = None,
) -> tuple[Collector, Collector, int | None]:
    """① the backend; then, with its current version, the live providers' access (two
    collectors: the plan lists the access checks after the sync objects')."""
    col, access, vault = Collector(), Collector(), adapters.vault
    version: list[int | None] = [None]

    def backend_version() -> str:
        vault.health()
        try:
            version[0] = backend.current_version(vault, credential.backend.path)
        except ForbiddenError as refused:  # the token, or its policy: each has its own fix
            raise explain_forbidden(vault, chain, [credential.name], refused) from None
        if version[0] == 0:
            return "reachable; path not written yet (the run creates v1)"
        return f"reachable; current version v{version[0]}"

    if col.run(BACKEND_REACHABLE, backend_version):
        col.run(BACKEND_CAPABILITIES,
                lambda: check_vault_capabilities(vault, chain, credential))
    if version[0]:
        for check, fn in live_provider_checks(adapters, credential, strategy,
                                              held_version or version[0], environ):
            access.run(check, fn)
    return col, access, version[0]


def _sync_objects(chain: Chain, credential: Credential, kube: Kube, overlap: bool,
                  uids: dict[ObjectRef, str], environ: Mapping[str, str]) -> Collector:
    """The permissions, the lock's namespace, and ② the ExternalSecret and its Secret."""
    col = Collector()
    col.run("kubernetes.permissions", _perms_fn(kube, chain, credential, environ))
    col.run("kubernetes.lock-namespace", lambda: _lock_namespace(kube, chain))
    es_ref = credential.external_secret
    es_ref = ObjectRef("ExternalSecret", es_ref.namespace, es_ref.name)

    def es_ready() -> str:
        es = kube.get("ExternalSecret", es_ref.namespace, es_ref.name)
        note_uid(uids, es_ref, es)
        col.traps.extend(traps.external_secret_traps(es, es_ref))
        ok, detail = sync.is_ready(es)
        if not ok:
            raise NotFoundError("eso", f"{es_ref}", f"not Ready: {detail}")
        return detail

    col.run("externalsecret.ready", es_ready)
    if overlap and credential.overlap is not None:
        prev_key = credential.overlap.previous_key

        def es_maps_previous() -> str:
            es = kube.get("ExternalSecret", es_ref.namespace, es_ref.name)
            return external_secret_maps(es, credential.backend.path, prev_key)

        col.run("externalsecret.previous-key", es_maps_previous)
    sec = credential.secret

    def target_secret() -> str:
        if kube.read_secret_key(sec.namespace, sec.name, sec.key) is None:
            raise NotFoundError("kubernetes", f"secret {sec}", "key absent")
        return f"secret {sec} exists"

    col.run("secret.exists", target_secret)
    return col


def _config_center(
    chain: Chain, cc: ConfigCenter, consumers: tuple[str, ...],
) -> tuple[Collector, dict[str, int | None], dict[str, tuple[str, ...]]]:
    """The Config Center, each consumer's document and tokens; with each document's version
    and each consumer's live token ids (absent when unreadable)."""
    col = Collector()
    config_versions: dict[str, int | None] = {}
    token_ids: dict[str, tuple[str, ...]] = {}
    if chain.config_center is None:
        col.add("configcenter.config", True, "no configCenter in the chain file: every "
                "consumer reads its Secret itself, the Config Center checks are skipped")
        return col, config_versions, token_ids
    if consumers and col.run("configcenter.reachable", lambda: _healthy(cc.health, cc.url)):
        found = fan_out(consumers, lambda name: _config_center_checks(
            cc, name, chain.services[name].config_key))
        col.merge(found)
        for name, fanned in zip(consumers, found, strict=True):
            config_versions[name], token_ids[name] = fanned.facts
            if fanned.facts[1] is None:
                del token_ids[name]
    return col, config_versions, token_ids


def _documents(chain: Chain, credential: Credential, kube: Kube, consumers: tuple[str, ...],
               candidate: Secret) -> Collector:
    """Each consumer's document, harvested with the candidate value, validates; its readyz
    Service exists."""
    col, reads = Collector(), harvest.SharedReads(kube)  # shared sources, read once

    def documents(name: str) -> Fanned:
        local = Collector()
        svc = chain.services[name]
        doc = harvest.harvest(reads, svc, {credential.secret: candidate})
        if doc.ok:
            local.add(f"document.valid {name}", True, "validates with the candidate value")
        else:
            local.add(f"document.valid {name}", False, "; ".join(str(p) for p in doc.problems))
        if svc.readyz.url is None and svc.readyz.service:
            local.run(f"readyz.service {name}", _exists_fn(
                kube, ObjectRef("Service", svc.namespace, svc.readyz.service or svc.name)))
        return Fanned(local.checks, [])

    col.merge(fan_out(consumers, documents))
    return col


def _config_center_checks(cc: ConfigCenter, name: str, key: str) -> Fanned:
    """The consumer's document exists, is writable, and which tokens it holds now; facts =
    (the document's version or None, the live token ids or None when unreadable)."""
    local = Collector()
    version: list[int | None] = [None]
    ids: list[tuple[str, ...] | None] = [None]

    def key_exists() -> str:
        version[0] = cc.get_version_number(name, key)
        if version[0] is None:
            raise NotFoundError("config center", f"{name}/{key}", "key does not exist")
        return f"{name}/{key} at v{version[0]}"

    def writable() -> str:
        cc.probe_write(name, key)  # If-Match "0": 412, nothing written
        return f"{name}/{key} writable (If-Match probe answered 412)"

    def live_tokens() -> str:
        found = tuple(tokens.current_ids(cc, name))
        ids[0] = found
        return f"{len(found)} live token(s)"

    local.run(f"configcenter.key {name}", key_exists)
    local.run(f"configcenter.writable {name}", writable)
    local.run(f"configcenter.tokens {name}", live_tokens)
    return Fanned(local.checks, [], (version[0], ids[0]))


def live_provider_checks(
    adapters: Adapters, credential: Credential, strategy: Strategy, version: int,
    environ: Mapping[str, str],
) -> Iterable[tuple[str, Callable[[], str]]]:
    """Per live provider (docs/chain-file.md "Preconditions"): the admin Secret exists, the
    admin authenticates, the method's preconditions hold with the backend's current value;
    alternating users: the ExternalSecret maps ``usernameKey`` too.  Observe only."""
    kube, vault, path = adapters.kube, adapters.vault, credential.backend.path
    es_ref = credential.external_secret
    for applied in credential.live_applies:
        if applied.username_key is not None:
            key = applied.username_key

            def maps_username(k: str = key) -> str:
                es = kube.get("ExternalSecret", es_ref.namespace, es_ref.name)
                return external_secret_maps(es, path, k)

            yield f"externalsecret.username-key {applied.provider}", maps_username

        def access(applied: ProviderApply = applied) -> str:
            if adapters.providers is None:
                raise NotFoundError("rotate", "provider connector", "not wired")
            active = (active_username(vault, path, applied.username_key, version)
                      if applied.username_key else None)
            accounts = accounts_for(applied, str(strategy), active)
            current = backend.read_value(vault, path, credential.backend.key, version)
            return provider_access.preflight(adapters.providers, kube, applied,
                                             credential.secret, accounts, current, environ,
                                             credential.generate)

        yield f"provider.access {applied.provider}", access


def external_secret_maps(es: Mapping[str, Any], path: str, key: str) -> str:
    """Does the ExternalSecret copy Vault ``path``#``key`` into its target Secret's ``key``?

    The overlap strategy depends on it: a provider can only accept the previous value if the
    Secret carries it.  ``dataFrom.extract`` of the path copies every key, so it counts too.
    """
    spec = es.get("spec") or {}
    for item in spec.get("data") or []:
        ref = item.get("remoteRef") or {}
        if (item.get("secretKey") == key and str(ref.get("key") or "").strip("/") == path
                and ref.get("property") == key):
            return f"maps {path}#{key} into the Secret's {key}"
    for item in spec.get("dataFrom") or []:
        extract = item.get("extract") or {}
        if str(extract.get("key") or "").strip("/") == path:
            return f"extracts every key of {path}, {key} included"
    raise NotFoundError("eso", "ExternalSecret",
                        f"no spec.data entry maps {path} property {key} into secretKey {key}: "
                        "the Secret would not carry the previous value the overlap relies on")


def _exists(kube: Kube, ref: ObjectRef) -> str:
    kube.get(ref.kind, ref.namespace or None, ref.name)
    shown = str(ref) if ref.namespace else f"{ref.kind.lower()} {ref.name}"
    return f"{shown} exists"


def _lock_namespace(kube: Kube, chain: Chain) -> str:
    """The lock namespace exists. rotate creates only the Lease in it, never the namespace:
    that would need a cluster-wide ``create namespaces`` grant, and a mistyped
    ``lockNamespace`` would silently become a second lock namespace, where another
    operator's runs would never see this run's Lease. A missing one fails with the command
    that creates it."""
    namespace = chain.cluster.lock_namespace
    try:
        return _exists(kube, ObjectRef("Namespace", "", namespace))
    except NotFoundError:
        raise NotFoundError(
            "kubernetes", f"namespace {namespace} (cluster.lockNamespace)",
            f"does not exist; rotate creates only the Lease in it, never the namespace: "
            f"kubectl create namespace {namespace}") from None


def _exists_fn(kube: Kube, ref: ObjectRef) -> Callable[[], str]:
    return lambda: _exists(kube, ref)


def _healthy(health: Callable[[], None], where: str) -> str:
    health()
    return f"reachable at {display_url(where)}"


def doctor_checks(
    chain: Chain, vault: Vault | None, kube: Kube | None, cc: ConfigCenter | None,
    environ: Mapping[str, str] | None = None,
) -> list[Check]:
    """Connectivity + every permission any credential's run needs; no credential required.
    An adapter that could not be built (None) is reported by the caller and skipped here.
    The token is checked on its own (``backend.token``): an invalid or expired one fails
    there, with its fix, instead of as every credential's missing capabilities."""
    col = Collector()
    vault_ok = vault is not None and col.run(
        BACKEND_REACHABLE, lambda: _healthy(vault.health, vault.address)) and col.run(
        BACKEND_TOKEN, lambda: describe_token(vault, chain))
    if kube is not None:
        col.run("kubernetes.lock-namespace", lambda: _lock_namespace(kube, chain))
    if cc is not None:
        col.run("configcenter.reachable", lambda: _healthy(cc.health, cc.url))
    for name, cred in chain.credentials.items():
        if vault is not None and vault_ok:
            col.run(f"{BACKEND_CAPABILITIES} {name}", _caps_fn(vault, chain, cred))
        if kube is not None:
            col.run(f"kubernetes.permissions {name}", _perms_fn(kube, chain, cred, environ))
    return col.checks


def _perms_fn(kube: Kube, chain: Chain, credential: Credential,
              environ: Mapping[str, str] | None) -> Callable[[], str]:
    def check() -> str:
        needed = permissions_needed(chain, credential, environ or {})
        missing = check_permissions(kube, needed)
        if missing:
            raise NotFoundError("kubernetes", "permissions", "missing: " + "; ".join(missing)
                                + f"; `rotate rbac {credential.name}` prints the grants (a "
                                "ClusterRole for those in all namespaces)")
        return f"{len(needed)} permission(s) granted"
    return check


def describe_failures(checks: Iterable[Check], found: Iterable[Trap]) -> str:
    lines: list[Any] = [f"  ✗ {c.check}: {c.detail}" for c in checks if not c.ok and c.fatal]
    lines += [f"  ✗ trap {t.name} on {t.target}: {t.problem} → {t.action}"
              for t in found if t.blocking]
    return "preflight failed — nothing was changed:\n" + "\n".join(lines)


def _caps_fn(vault: Vault, chain: Chain, credential: Credential) -> Callable[[], str]:
    return lambda: check_vault_capabilities(vault, chain, credential)

"""What a run of one credential may do: the one list behind ``doctor``, preflight,
``rotate rbac`` and ``rotate vault-policy``.

:func:`permissions_needed` lists every Kubernetes request a run (rotate, resume, rollback)
makes, as a :class:`Permission`; :func:`vault_grants` lists every OpenBao/Vault capability.
Preflight and ``doctor`` check exactly these (SelfSubjectAccessReview, ``capabilities-self``);
the generated RBAC and policy grant exactly these.  So a permission added here is checked
and granted at once.  A request the engine makes that is missing here fails the lab proof
(tests/e2e/test_least_privilege.py: a ServiceAccount with exactly these grants rotates
``dragonfly`` and ``dragonfly-acl`` — Deployment provider and consumers, restart and overlap
strategies, the restart strategy waiting for the consumers' new pods to start by listing
and watching Pods); the StatefulSet and DaemonSet pod permissions are listed from the code, not
proven there.

Events (rotate.engine.events): ``create events`` in every namespace of an object the run
acts on.  Creating one is best effort at run time, but it is listed — and so checked and
granted — like every other request, so a run with the generated RBAC leaves its whole trail.

Invariants:

* ``name`` is set only where the request names its object *and* RBAC can restrict it:
  never on ``create`` (the name is in the body, RBAC cannot see it), never on a ``list`` or
  ``watch`` the engine makes without a ``metadata.name`` field selector (Pods, VSO objects).
  ``KubeClient.watch(name=...)`` sends that field selector, so a named watch is restricted.
* The list is deduplicated and in first-seen order, so the output is deterministic.
* One SelfSubjectAccessReview per permission (about 30 for one credential, on the
  preflight fan-out), not one SelfSubjectRulesReview per namespace, although that would be
  fewer requests: the API documents a rules review as possibly incomplete (it depends on
  the authorizer) and as unfit to drive authorization decisions; an access review is the
  API server's own decision for exactly the request the run will make.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rotate.chain.methods import KubeAccess, VaultAccess, find_spec
from rotate.chain.model import Chain, Credential, ProviderApply, SecretKeySource, ServiceSource
from rotate.chain.routes import may_port_forward
from rotate.chain.value_graph import consumers_of
from rotate.clients.seams import Kube, Vault
from rotate.core.errors import ForbiddenError, NotFoundError
from rotate.core.refs import ObjectRef
from rotate.engine.fanout import fan_out
from rotate.engine.lock import lease_name, provider_lease_name
from rotate.engine.preflight_readers import READER_KINDS, cluster_wide, target_secrets
from rotate.stages.rollout import VSO_KINDS

#: what preflight and doctor call to learn the token's capabilities
CAPABILITIES_SELF = "sys/capabilities-self"


def policy_fix(names: Sequence[str]) -> str:
    """The command that prints the policy ``names`` need, and how to apply it."""
    args = "".join(f" {n}" for n in names)
    return (f"`rotate vault-policy{args}` prints the policy to apply "
            f"(`rotate vault-policy{args} | bao policy write rotate -`, then attach it to "
            "the token)")


@dataclass(frozen=True)
class Permission:
    """``verb`` on ``kind`` (``/subresource``) in ``namespace`` (None: cluster-scoped), on the
    object ``name`` when set, on any object of the kind otherwise."""

    verb: str
    kind: str
    namespace: str | None
    subresource: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class VaultGrant:
    """Capabilities on one OpenBao/Vault API path (``secret/data/infra/dragonfly``)."""

    path: str
    capabilities: tuple[str, ...]
    why: str


def deduplicate(perms: Iterable[Permission]) -> list[Permission]:
    """First-seen order; a named permission covered by an unnamed one is dropped, and so is
    any permission in one namespace covered by the same one in every namespace (namespace
    None, unnamed) — so that every generated rule is needed and removing it is noticed."""
    perms = list(dict.fromkeys(perms))
    unnamed = {(p.verb, p.kind, p.namespace, p.subresource) for p in perms if p.name is None}

    def covered(p: Permission) -> bool:
        if p.namespace is not None and (p.verb, p.kind, None, p.subresource) in unnamed:
            return True
        return p.name is not None and (p.verb, p.kind, p.namespace, p.subresource) in unnamed
    return [p for p in perms if not covered(p)]


def watch_permissions(chain: Chain, credentials: Sequence[Credential]) -> list[Permission]:
    """What ``rotate watch`` needs beyond its credentials' runs (rotate.engine.watcher):
    kopf lists and watches Secrets per namespace — RBAC cannot restrict a list or a watch
    by name — so each target Secret's namespace grants ``list``/``watch`` on Secrets; and
    the leader Lease ``rotate-watch`` in the lock namespace."""
    from rotate.engine.leadership import LEASE_NAME

    lock_ns = chain.cluster.lock_namespace
    perms = [Permission(v, "Secret", ns) for ns in
             dict.fromkeys(c.secret.namespace for c in credentials) for v in ("list", "watch")]
    perms.append(Permission("create", "Lease", lock_ns))
    perms += [Permission(v, "Lease", lock_ns, name=LEASE_NAME) for v in ("get", "update")]
    return perms


def permissions_needed(chain: Chain, credential: Credential,
                       environ: Mapping[str, str] | None = None) -> list[Permission]:
    """Every Kubernetes request a run of ``credential`` makes (SelfSubjectAccessReview each).
    ``environ``: the environment the run happens in, which decides whether providers are
    port-forwarded to (rotate.chain.routes); None (``rotate rbac``): wherever it may run."""
    perms: list[Permission] = []
    es = credential.external_secret
    perms += [Permission(v, "ExternalSecret", es.namespace, name=es.name)
              for v in ("get", "watch", "patch")]
    sec = credential.secret
    perms.append(Permission("get", "Secret", sec.namespace, name=sec.name))
    lock_ns = chain.cluster.lock_namespace
    perms.append(Permission("get", "Namespace", None, name=lock_ns))
    perms.append(Permission("create", "Lease", lock_ns))
    perms += [Permission(v, "Lease", lock_ns, name=name)
              for name in (lease_name(credential.name),
                           *(provider_lease_name(p) for p in credential.providers))
              for v in ("get", "update", "delete")]
    # the run journals (rotate.clients.cluster_journals): one ConfigMap per run, named by
    # its run id — not known ahead, so not restricted by name
    perms += [Permission(v, "ConfigMap", lock_ns)
              for v in ("create", "get", "list", "update", "delete")]
    workloads = list(credential.providers)
    for svc_name in consumers_of(chain, credential.name):
        svc = chain.services[svc_name]
        workloads.append(ObjectRef(svc.workload.kind, svc.namespace, svc.workload.name))
        if svc.workload.kind == "Deployment":  # a prepared rollout: its new pods, started
            perms += [Permission(v, "Pod", svc.namespace) for v in ("list", "watch")]
        tok = svc.token
        perms += [Permission(v, "Secret", tok.namespace, name=tok.name) for v in ("get", "patch")]
        perms.append(Permission("create", "Secret", tok.namespace))
        for source in svc.values.values():
            if isinstance(source, SecretKeySource):
                perms.append(Permission("get", "Secret", source.namespace, name=source.name))
            elif isinstance(source, ServiceSource) and isinstance(source.port, str):
                perms.append(Permission("get", "Service", source.namespace, name=source.name))
        ready = svc.readyz
        if ready.url is None:
            service = ready.service or svc.name
            # the service proxy's object name is "NAME:PORT", as KubeClient.proxy_get sends it
            perms.append(Permission("get", "Service", svc.namespace, "proxy",
                                    name=f"{service}:{ready.port or ''}"))
            if ready.service:
                perms.append(Permission("get", "Service", svc.namespace, name=ready.service))
    for ref in workloads:
        perms += [Permission(v, ref.kind, ref.namespace, name=ref.name)
                  for v in ("get", "watch", "patch")]
        if ref.kind == "StatefulSet":  # OnDelete: pods deleted by ordinal, watched in the ns
            perms += [Permission(v, "Pod", ref.namespace) for v in ("get", "delete", "watch")]
        elif ref.kind == "DaemonSet":  # OnDelete: its pods found by listing, then deleted
            perms += [Permission(v, "Pod", ref.namespace) for v in ("list", "delete", "watch")]
    # workloads that read the Secret themselves: found by listing, rolled by name unknown
    # until preflight (so unnamed), their pods watched (a prepared or OnDelete rollout)
    # consumers.allNamespaces: the same verbs in every namespace (namespace None: a
    # cluster-wide grant, a ClusterRole), each kind listed once across the cluster
    discovered: list[str | None] = (
        [None] if cluster_wide(chain) else list(target_secrets(chain, credential)))
    for where in discovered:  # and further ExternalSecrets of the path, synced and proven
        perms += [Permission(v, kind, where) for kind in READER_KINDS
                  for v in ("get", "list", "watch", "patch")]
        perms += [Permission(v, "ExternalSecret", where)
                  for v in ("get", "list", "watch", "patch")]
        perms.append(Permission("get", "Secret", where))
        perms += [Permission(v, "Pod", where) for v in ("get", "list", "watch", "delete")]
    consumer_ns = [chain.services[s].namespace for s in consumers_of(chain, credential.name)]
    for ns in _unless_everywhere([*consumer_ns, *discovered]):  # a budget: an outage anyway
        perms.append(Permission("list", "PodDisruptionBudget", ns))
    for ns in _unless_everywhere([*(ref.namespace for ref in workloads), *discovered]):
        perms += [Permission("list", kind, ns) for kind in VSO_KINDS]
    # Events on every object a run acts on (rotate.engine.events), in that object's namespace
    token_ns = [chain.services[s].token.namespace for s in consumers_of(chain, credential.name)]
    for ns in _unless_everywhere([es.namespace, sec.namespace, *token_ns,
                                  *(ref.namespace for ref in workloads), *discovered]):
        perms.append(Permission("create", "Event", ns))
    perms += _provider_connections(credential, environ)
    return deduplicate(perms)


def _unless_everywhere(namespaces: Sequence[str | None]) -> list[str | None]:
    """``namespaces`` once each — or only None (every namespace) when it is among them: a
    cluster-wide grant covers each namespace's, so asking for both would ask twice."""
    if None in namespaces:
        return [None]
    return list(dict.fromkeys(namespaces))


def _provider_connections(credential: Credential,
                          environ: Mapping[str, str] | None) -> list[Permission]:
    """Live methods and probes: what the method declares (MethodSpec.access), the Service
    rotate connects to (its Endpoints: headless, or the pod to port-forward to), an admin
    Secret other than the credential's own, and — from outside the cluster —
    ``pods/portforward`` in the Service's namespace: ``create`` (kubectl's SPDY POST, and
    what API servers since 1.35 also require of a websocket upgrade) and ``get`` (the
    websocket upgrade of the Python client is a GET; older servers authorize only that)."""
    perms: list[Permission] = []
    for ref in credential.providers:
        applied = credential.apply_of(ref)
        perms += [Permission(a.verb, a.kind, a.namespace, a.subresource, name=a.name)
                  for a in _method_access(applied) if isinstance(a, KubeAccess)]
        if applied.connection is None:
            continue
        svc = applied.connection.service
        perms += [Permission("get", kind, svc.namespace, name=svc.name)
                  for kind in ("Service", "Endpoints")]
        if may_port_forward(applied.connection, environ):
            perms += [Permission(verb, "Pod", svc.namespace, "portforward")
                      for verb in ("create", "get")]
        admin = applied.admin
        if admin is not None and admin.password is not None \
                and not applied.admin_is_credential(credential.secret):
            perms.append(Permission("get", "Secret", admin.password.namespace,
                                    name=admin.password.name))
    return perms


def _method_access(applied: ProviderApply) -> list[KubeAccess | VaultAccess]:
    """What a live method declares it needs beyond the above (MethodSpec.access)."""
    spec = find_spec(applied.method) if applied.live else None
    return list(spec.access(applied)) if spec is not None and spec.access is not None else []


def describe(perm: Permission, plural: str, namespaced: bool = False) -> str:
    """``patch deployments in shop`` — the words doctor prints (without the name); a
    namespaced kind asked in every namespace: ``list deployments in all namespaces``."""
    what = plural + (f"/{perm.subresource}" if perm.subresource else "")
    where = (f" in {perm.namespace}" if perm.namespace
             else " in all namespaces" if namespaced else "")
    return f"{perm.verb} {what}{where}"


def check_permissions(kube: Kube, perms: Iterable[Permission]) -> list[str]:
    """The permissions the caller lacks, as ``verb kind[/sub] in ns (names)`` strings, one
    per verb and resource, naming the objects when the permission is for named ones.

    One review per verb/resource/namespace first: allowed on every object, it covers every
    named permission of that group (100 consumers: ~15 reviews, not ~800); refused, each named
    permission is asked on its own (an identity scoped with resourceNames).  The reviews of
    each round are independent and run on the preflight pool (rotate.engine.fanout)."""
    from rotate.clients.kube_kinds import kind_info

    perms = list(perms)
    groups = list(dict.fromkeys(_group(p) for p in perms if p.name is not None))
    wide = dict(zip(groups, fan_out(groups, lambda g: kube.can_i(
        g[0], g[1], g[2], subresource=g[3])), strict=True))
    asked = [p for p in perms if p.name is None or not wide[_group(p)]]
    allowed = fan_out(asked, lambda p: kube.can_i(
        p.verb, p.kind, p.namespace, subresource=p.subresource, name=p.name))
    missing: dict[str, list[str]] = {}
    for perm, ok in zip(asked, allowed, strict=True):
        if not ok:
            info = kind_info(perm.kind)
            names = missing.setdefault(describe(perm, info.plural, info.namespaced), [])
            if perm.name:
                names.append(perm.name)
    return [what + (f" ({', '.join(names)})" if names else "") for what, names in missing.items()]


def _group(perm: Permission) -> tuple[str, str, str | None, str | None]:
    return (perm.verb, perm.kind, perm.namespace, perm.subresource)


# --------------------------------------------------------------------------- OpenBao / Vault


def vault_grants(chain: Chain, credential: Credential) -> list[VaultGrant]:
    """The KV v2 paths a run of ``credential`` uses and the capabilities on each.

    ``create`` on both: the path may be new (the first run writes v1, and the custom
    metadata before it); KV v2 asks for ``create`` rather than ``update`` then.
    """
    mount, path = chain.backend.kv_mount, credential.backend.path
    declared = [VaultGrant(a.path, a.capabilities, a.why)
                for ref in credential.providers
                for a in _method_access(credential.apply_of(ref)) if isinstance(a, VaultAccess)]
    return [
        VaultGrant(f"{mount}/data/{path}", ("create", "read", "update"),
                   "read the current and older versions; write the new one (check-and-set)"),
        VaultGrant(f"{mount}/metadata/{path}", ("create", "read", "update"),
                   "current version; custom metadata naming the run"),
        *declared,
    ]


def capabilities_self_grant() -> VaultGrant:
    """Not per credential: preflight and doctor ask the token's own capabilities."""
    return VaultGrant(CAPABILITIES_SELF, ("update",),
                      "preflight and doctor check the capabilities above")


def vault_paths(chain: Chain, credential: Credential) -> tuple[str, ...]:
    return tuple(g.path for g in vault_grants(chain, credential))


def check_vault_capabilities(vault: Vault, chain: Chain, credential: Credential) -> str:
    grants = vault_grants(chain, credential)
    try:
        caps = vault.capabilities([g.path for g in grants])
    except ForbiddenError:
        raise NotFoundError("vault", "capabilities", "forbidden: the token is invalid or lacks "
                            f"update on {CAPABILITIES_SELF}") from None
    lacking = []
    for grant in grants:
        got = caps.get(grant.path, [])
        if "root" in got:
            continue
        lacking += [f"{need} on {grant.path}" for need in grant.capabilities if need not in got]
    if lacking:
        raise NotFoundError("vault", "capabilities", "missing " + ", ".join(lacking) + "; "
                            + policy_fix([credential.name]))
    return "/".join(grants[0].capabilities) + " on " + " and ".join(g.path for g in grants)

"""Preflight's discovery of the workloads that read a credential's Secret themselves
(chain.md "Workloads that read the Secret"), and of what would make a consumer's restart an
outage anyway (PodDisruptionBudgets, a single replica).

Observe only.  In every namespace of ``consumers.namespaces`` where a target Secret lives
(or, under ``consumers.allNamespaces``, across the cluster: one list per kind), the
Deployments, StatefulSets and DaemonSets are listed once each and every one whose pod
template reads that Secret is a reader (rotate.stages.secret_readers) — but the providers
and the chain's services, which other steps already roll.  A namespace rotate may not list
is a failed check naming it and the fix: a reader there would keep the old value unseen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rotate.chain.model import Chain, Credential
from rotate.clients.seams import Kube
from rotate.core.errors import ClientError, ForbiddenError, NotFoundError
from rotate.core.refs import ObjectRef
from rotate.engine.collector import Collector, note_uid
from rotate.engine.targets import workload_ref
from rotate.stages import secret_readers, sync, traps

#: the kinds whose pod templates are searched, in the order they are listed
READER_KINDS = ("Deployment", "StatefulSet", "DaemonSet")


@dataclass
class Readers:
    """The readers found: ref → the reader, in namespace, kind, then list order; and the
    further ExternalSecrets of the credential's path: "ns/name" → "ns/secret#key"."""

    found: dict[str, secret_readers.Reader] = field(default_factory=dict)
    external_secrets: dict[str, str] = field(default_factory=dict)

    @property
    def restarts(self) -> tuple[str, ...]:
        return tuple(ref for ref, r in self.found.items() if r.action == secret_readers.RESTART)

    @property
    def words(self) -> dict[str, str]:
        return {ref: r.words for ref, r in self.found.items()}


def target_secrets(chain: Chain, credential: Credential) -> tuple[str, ...]:
    """The namespaces discovery searches: ``consumers.namespaces`` (the RBAC it needs is
    granted there, the objects found there are known only at run time).  Empty under
    ``consumers.allNamespaces``: see :func:`cluster_wide`."""
    return chain.workload_consumers.namespaces


def cluster_wide(chain: Chain) -> bool:
    """``consumers.allNamespaces``: every namespace is searched, one list per kind across
    the cluster, and the grants are cluster-wide (a ClusterRole)."""
    return chain.workload_consumers.all_namespaces


#: the check of a cluster-wide discovery (one for every namespace)
ALL_NAMESPACES = "(all namespaces)"


def discover(chain: Chain, credential: Credential, kube: Kube, col: Collector) -> Readers:
    """The further ExternalSecrets of the credential's path and the readers of every target
    Secret; one ``consumers.discovered NS`` check per namespace searched (failed, naming the
    rbac fix, when it cannot be listed) — or one ``consumers.discovered (all namespaces)``
    under ``consumers.allNamespaces``."""
    out = Readers()
    skip = {str(ref) for ref in credential.providers}
    skip |= {str(workload_ref(svc)) for svc in chain.services.values()}
    if cluster_wide(chain):
        col.run(f"consumers.discovered {ALL_NAMESPACES}",
                _everywhere(kube, credential, skip, out))
        return out
    for ns in target_secrets(chain, credential):
        col.run(f"consumers.discovered {ns}", _namespace(kube, credential, ns, skip, out))
    return out


def _forbidden(what: str, ns: str) -> ForbiddenError:
    return ForbiddenError(
        "kubernetes", f"list {what} in namespace {ns}",
        f"rotate may not list the {what} of namespace {ns}, so a workload there reading the "
        "Secret would keep the old value unseen; apply the output of `rotate rbac` (it grants "
        "list on externalsecrets, deployments, statefulsets and daemonsets in every namespace "
        "of consumers.namespaces), or remove it from consumers.namespaces")


def _forbidden_everywhere(what: str, credential: Credential) -> ForbiddenError:
    return ForbiddenError(
        "kubernetes", f"list {what} in all namespaces",
        f"rotate may not list the {what} of every namespace (consumers.allNamespaces), so a "
        "workload reading the Secret somewhere would keep the old value unseen; missing: the "
        f"cluster-wide grant `list {what}` (a ClusterRole bound by a ClusterRoleBinding). "
        f"`rotate rbac {credential.name} | kubectl apply -f -` applies the ClusterRole it "
        "needs; or name the namespaces instead (consumers.namespaces)")


def _listed(kube: Kube, kind: str, ns: str | None,
            forbidden: Callable[[str], ForbiddenError]) -> list[dict[str, Any]]:
    try:
        return kube.list(kind, ns)
    except ForbiddenError:
        raise forbidden(f"{kind.lower()}s") from None


def _mapped(credential: Credential, listed: list[dict[str, Any]], default_ns: str | None,
            out: Readers) -> dict[str, list[str]]:
    """namespace → the target Secrets there: the credential's own, and those of every
    further ExternalSecret of its path (recorded in ``out``)."""
    primary, sec = credential.external_secret, credential.secret
    secrets: dict[str, list[str]] = {}
    if default_ns is None or sec.namespace == default_ns:
        secrets[sec.namespace] = [sec.name]
    for es in listed:
        meta = es.get("metadata") or {}
        ns, name = str(meta.get("namespace") or default_ns or ""), str(meta.get("name") or "")
        mapped = secret_readers.maps_path(es, credential.backend.path, credential.backend.key)
        if mapped is None or (ns, name) == (primary.namespace, primary.name):
            continue
        out.external_secrets[f"{ns}/{name}"] = f"{ns}/{mapped[0]}#{mapped[1]}"
        secrets.setdefault(ns, []).append(mapped[0])
    return secrets


def _match(objs: list[dict[str, Any]], kind: str, default_ns: str | None,
           secrets: Mapping[str, list[str]], skip: set[str], out: Readers) -> int:
    """Record each workload reading a target Secret *of its own namespace* (a pod never
    reads another namespace's Secret: a Secret of the same name elsewhere is another one,
    a reader only when an ExternalSecret of this path fills it)."""
    found = 0
    for obj in objs:
        meta = obj.get("metadata") or {}
        ns = str(meta.get("namespace") or default_ns or "")
        ref = str(ObjectRef(kind, ns, str(meta.get("name"))))
        if ref in skip or ref in out.found:
            continue
        for secret in secrets.get(ns, ()):
            reader = secret_readers.reader(obj, secret)
            if reader is not None:
                out.found[ref] = reader
                found += 1
                break
    return found


def _namespace(kube: Kube, credential: Credential, ns: str, skip: set[str],
               out: Readers) -> Callable[[], str]:
    def check() -> str:
        def forbidden(what: str) -> ForbiddenError:
            return _forbidden(what, ns)

        secrets = _mapped(credential, _listed(kube, "ExternalSecret", ns, forbidden), ns, out)
        found = sum(_match(_listed(kube, kind, ns, forbidden), kind, ns, secrets, skip, out)
                    for kind in (READER_KINDS if secrets.get(ns) else ()))
        if not secrets.get(ns):
            return f"no Secret of this credential in {ns}"
        return f"{found} workload(s) in {ns} read Secret {', '.join(secrets[ns])} themselves"
    return check


def _everywhere(kube: Kube, credential: Credential, skip: set[str],
                out: Readers) -> Callable[[], str]:
    """One list per kind across the cluster, not one per namespace."""
    def check() -> str:
        def forbidden(what: str) -> ForbiddenError:
            return _forbidden_everywhere(what, credential)

        secrets = _mapped(credential, _listed(kube, "ExternalSecret", None, forbidden), None,
                          out)
        found = sum(_match(_listed(kube, kind, None, forbidden), kind, None, secrets, skip, out)
                    for kind in READER_KINDS)
        where = "; ".join(f"{ns}: {', '.join(names)}" for ns, names in sorted(secrets.items()))
        return (f"{found} workload(s) in {len(secrets)} namespace(s) read the credential's "
                f"Secrets themselves ({where})")
    return check


def disruption(obj: Mapping[str, Any], ref: ObjectRef, pdbs: list[dict[str, Any]],
               no_surge: bool) -> str | None:
    """Why restarting ``obj`` is an outage whatever rotate does (None: it is not): a single
    replica replaced before its successor is Ready, or a PodDisruptionBudget selecting its
    pods that allows no disruption (``maxUnavailable: 0``, ``minAvailable`` ≥ replicas) —
    an eviction-based drain of it would hang, and its pods have no spare to lose."""
    spec = obj.get("spec") or {}
    replicas = int(spec.get("replicas", 1)) if ref.kind != "DaemonSet" else None
    labels = (((spec.get("template") or {}).get("metadata") or {}).get("labels")) or {}
    for pdb in pdbs:
        pspec = pdb.get("spec") or {}
        if not _selects(pspec.get("selector") or {}, labels):
            continue
        name = f"PodDisruptionBudget {ref.namespace}/{(pdb.get('metadata') or {}).get('name')}"
        if str(pspec.get("maxUnavailable", "")) in ("0", "0%"):
            return (f"{name} (maxUnavailable: 0) allows no pod of {ref} to go: its restart "
                    "replaces pods the budget protects, an outage for what relies on it")
        least = pspec.get("minAvailable")
        if replicas is not None and least is not None and str(least) in (
                str(replicas), "100%"):
            return (f"{name} (minAvailable: {least}) equals the {replicas} replica(s) of "
                    f"{ref}: its restart takes a pod the budget protects")
    if replicas == 1 and no_surge:
        return (f"{ref} has a single replica, replaced before its successor is Ready: its "
                "restart is an outage of one pod start")
    return None


def _selects(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """matchLabels and the In/NotIn/Exists/DoesNotExist expressions; an empty selector
    selects every pod of the namespace (policy/v1)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def budgets(kube: Kube, ns: str, col: Collector, seen: dict[str, list[dict[str, Any]]]
            ) -> list[dict[str, Any]]:
    """The PodDisruptionBudgets of ``ns``, listed once (none when the kind is not served;
    a warning when they cannot be listed)."""
    if ns not in seen:
        try:
            seen[ns] = kube.list("PodDisruptionBudget", ns)
        except NotFoundError:
            seen[ns] = []
        except ClientError as exc:
            col.add(f"pdb.visible {ns}", False,
                    f"cannot list PodDisruptionBudgets in {ns} ({exc.reason}): a budget that "
                    "makes a consumer's restart an outage would go unnoticed", fatal=False)
            seen[ns] = []
    return seen[ns]


def external_secret_checks(kube: Kube, found: Readers, col: Collector,
                           uids: dict[ObjectRef, str]) -> None:
    """Each further ExternalSecret is Ready now and free of the sync traps (as the
    credential's own: ``externalsecret.ready NS/NAME``)."""
    for short in found.external_secrets:
        ns, name = short.split("/", 1)
        ref = ObjectRef("ExternalSecret", ns, name)

        def ready(ref: ObjectRef = ref, into: str = found.external_secrets[short]) -> str:
            es = kube.get("ExternalSecret", ref.namespace, ref.name)
            note_uid(uids, ref, es)
            col.traps.extend(traps.external_secret_traps(es, ref))
            ok, detail = sync.is_ready(es)
            if not ok:
                raise NotFoundError("eso", str(ref), f"not Ready: {detail}")
            return f"{detail}; maps the path into {into}"

        col.run(f"externalsecret.ready {short}", ready)

"""Workloads that read the credential's Secret themselves (chain.md "Workloads that read the
Secret"): how each is found, what the plan does with it, and the warnings of a restart that
is an outage anyway.  On the fakes; the lab proves the same from outside
(tests/e2e/test_secret_readers.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rotate.chain.sections import WorkloadConsumers
from rotate.core.errors import ForbiddenError
from rotate.core.refs import ObjectRef
from rotate.engine.collector import Collector
from rotate.engine.preflight_readers import discover, disruption
from rotate.stages import secret_readers
from rotate.stages.rollout import RESTARTED_AT
from tests.fakes import World, deployment
from tests.support.engine import options, resume, rollback, run

SECRET = "dragonfly-password-secret"
OLD = "old-password-0123456789abcdefghijklmn"  # World.setup's


def reading(ns: str, name: str, *, env: bool = False, env_from: bool = False,
            volume: bool = False, projected: bool = False, init: bool = False,
            annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    dep = deployment(ns, name, annotations=annotations, **spec)
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    if env:
        c["env"] = [{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {
            "name": SECRET, "key": "password"}}}]
    if env_from:
        c["envFrom"] = [{"secretRef": {"name": SECRET}}]
    if volume:
        pod["volumes"] = [{"name": "creds", "secret": {"secretName": SECRET}}]
    if projected:
        pod["volumes"] = [{"name": "all", "projected": {"sources": [
            {"configMap": {"name": "x"}}, {"secret": {"name": SECRET}}]}}]
    if init:
        pod["initContainers"] = [{"name": "wait", "env": [{"name": "P", "valueFrom": {
            "secretKeyRef": {"name": SECRET, "key": "password"}}}]}]
    return dep


def test_every_way_of_reading_the_secret_is_found() -> None:
    assert secret_readers.reads(reading("a", "b", env=True), SECRET) == (
        "env PASSWORD (container b)",)
    assert secret_readers.reads(reading("a", "b", env_from=True), SECRET) == (
        "envFrom (container b)",)
    assert secret_readers.reads(reading("a", "b", volume=True), SECRET) == ("volume creds",)
    assert secret_readers.reads(reading("a", "b", projected=True), SECRET) == (
        "projected volume all",)
    assert secret_readers.reads(reading("a", "b", init=True), SECRET) == (
        "env P (init container wait)",)
    assert secret_readers.reads(reading("a", "b", env=True), "another") == ()
    assert secret_readers.reader(deployment("a", "b"), SECRET) is None


def test_the_annotations_opt_out_or_declare_a_file_reloader() -> None:
    ignored = secret_readers.reader(reading("a", "b", env=True, annotations={
        "rotate.dev/consumer": "ignore"}), SECRET)
    assert ignored is not None and ignored.action == secret_readers.IGNORED
    files = secret_readers.reader(reading("a", "b", volume=True, annotations={
        "rotate.dev/reloads": "file"}), SECRET)
    assert files is not None and files.action == secret_readers.RELOADS_FILE
    assert "not restarted" in files.words
    # an environment variable changes only with a restart: the annotation cannot hold
    mixed = secret_readers.reader(reading("a", "b", volume=True, env=True, annotations={
        "rotate.dev/reloads": "file"}), SECRET)
    assert mixed is not None and mixed.action == secret_readers.RESTART
    assert "an environment variable changes only with a restart" in mixed.words


def test_an_external_secret_maps_the_path_by_data_or_extract() -> None:
    es = {"metadata": {"name": "creds"}, "spec": {"data": [{"secretKey": "PW", "remoteRef": {
        "key": "/infra/dragonfly", "property": "password"}}]}}
    assert secret_readers.maps_path(es, "infra/dragonfly", "password") == ("creds", "PW")
    assert secret_readers.maps_path(es, "infra/other", "password") is None
    extract = {"metadata": {"name": "e"}, "spec": {"target": {"name": "t"}, "dataFrom": [
        {"extract": {"key": "infra/dragonfly"}}]}}
    assert secret_readers.maps_path(extract, "infra/dragonfly", "password") == ("t", "password")


def test_a_restart_that_is_an_outage_anyway_is_named() -> None:
    ref = ObjectRef("Deployment", "shop", "cart")
    dep = deployment("shop", "cart", replicas=2)
    dep["spec"]["template"]["metadata"]["labels"] = {"app": "cart"}
    budget = {"metadata": {"name": "cart"}, "spec": {"selector": {"matchLabels": {
        "app": "cart"}}, "maxUnavailable": 0}}
    why = disruption(dep, ref, [budget], no_surge=False)
    assert why is not None and "PodDisruptionBudget shop/cart (maxUnavailable: 0)" in why
    full = {"metadata": {"name": "min"}, "spec": {"selector": {}, "minAvailable": 2}}
    assert "minAvailable: 2" in (disruption(dep, ref, [full], no_surge=False) or "")
    other = {"metadata": {"name": "x"}, "spec": {"selector": {"matchLabels": {"app": "y"}},
                                                 "maxUnavailable": 0}}
    assert disruption(dep, ref, [other], no_surge=False) is None
    single = deployment("shop", "cart", replicas=1)
    assert "single replica" in (disruption(single, ref, [], no_surge=True) or "")
    assert disruption(single, ref, [], no_surge=False) is None  # surge keeps it serving


def with_readers(world: World, *namespaces: str) -> None:
    world.chain = dataclasses.replace(world.chain,
                                      workload_consumers=WorkloadConsumers(namespaces))


def test_a_discovered_reader_is_restarted_once_the_secret_holds_the_new_value(
        world: World, tmp_path: Path) -> None:
    with_readers(world, "dragonfly")
    world.kube.put(reading("dragonfly", "warmer", env=True))
    world.kube.put(reading("dragonfly", "skipped", volume=True,
                           annotations={"rotate.dev/consumer": "ignore"}))
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    assert set(plan.readers) == {"deployment/dragonfly/warmer", "deployment/dragonfly/skipped"}
    assert "not restarted" in plan.readers["deployment/dragonfly/skipped"]
    steps = [(s.kind, s.subject) for s in plan.steps]
    ref = "deployment/dragonfly/warmer"
    assert steps.index(("sync.wait", "")) < steps.index(("workload.restart", ref)) < min(
        i for i, (k, _) in enumerate(steps) if k == "provider.restart")
    assert ("workload.wait", ref) in steps and ("workload.restart",
                                                "deployment/dragonfly/skipped") not in steps
    report = run(world, tmp_path)
    assert report.exit_code == 0, report.message
    template = world.kube.raw("Deployment", "dragonfly", "warmer")["spec"]["template"]
    assert RESTARTED_AT in template["metadata"]["annotations"]
    assert "dragonfly/warmer" in world.rollouts


class ForbiddenLists:
    """A Kube that may not list the workloads of one namespace."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    def list(self, kind: str, namespace: str | None, **_: Any) -> list[dict[str, Any]]:
        if namespace == self.namespace and kind != "ExternalSecret":
            raise ForbiddenError("kubernetes", f"list {kind}", "forbidden", status=403)
        return []


def test_a_namespace_rotate_may_not_list_fails_preflight_naming_the_fix(world: World) -> None:
    with_readers(world, "dragonfly")
    col = Collector()
    discover(world.chain, world.chain.credentials["dragonfly"],
             ForbiddenLists("dragonfly"), col)  # type: ignore[arg-type]
    [check] = col.checks
    assert check.check == "consumers.discovered dragonfly" and not check.ok and check.fatal
    assert "namespace dragonfly" in check.detail and "rotate rbac" in check.detail


def test_a_reader_that_never_starts_fails_before_the_switch_and_resume_or_rollback_heal(
        world: World, tmp_path: Path) -> None:
    """A discovered reader whose new pods never start fails its workload.restart (exit 15)
    before any provider step; the run undoes what it prepared — the reader's template too —
    and both a resume (once fixed) and a rollback end consistent."""
    with_readers(world, "dragonfly")
    world.kube.put(reading("dragonfly", "warmer", env=True))
    world.unstarted.add("warmer")
    report = run(world, tmp_path, timeout=0.5)
    assert (report.status, report.exit_code) == ("failed", 15), report.message
    assert "workload.restart on deployment/dragonfly/warmer failed" in report.message
    assert "dragonfly/dragonfly" not in world.rollouts
    undone = {s.kind for s in report.steps if s.kind.endswith(".undo") and s.status == "done"}
    assert "workload.undo" in undone
    template = world.kube.raw("Deployment", "dragonfly", "warmer")["spec"]["template"]
    assert RESTARTED_AT not in (template["metadata"].get("annotations") or {})

    world.unstarted.discard("warmer")  # a rollback restarts it too: fixed first
    rb = rollback(world, tmp_path, report.run_id)
    assert rb.status == "succeeded", rb.message
    assert world.vault.current("infra/dragonfly", "password") == OLD
    assert world.kube.secret_value("dragonfly", SECRET, "password") == OLD


def test_a_fixed_reader_is_resumed_to_the_end(world: World, tmp_path: Path) -> None:
    with_readers(world, "dragonfly")
    world.kube.put(reading("dragonfly", "warmer", env=True))
    world.unstarted.add("warmer")
    report = run(world, tmp_path, timeout=0.5)
    assert report.exit_code == 15, report.message
    world.unstarted.discard("warmer")
    resumed = resume(world, tmp_path, report.run_id)
    assert resumed.status == "succeeded", resumed.message
    template = world.kube.raw("Deployment", "dragonfly", "warmer")["spec"]["template"]
    assert RESTARTED_AT in template["metadata"]["annotations"]


class CountedLists:
    """The fake Kube, counting list calls by (kind, namespace); ``forbid``: kinds whose
    cluster-wide list is refused (403)."""

    def __init__(self, kube: Any, forbid: tuple[str, ...] = ()) -> None:
        self.kube, self.forbid, self.calls = kube, forbid, list[tuple[str, str | None]]()

    def list(self, kind: str, namespace: str | None, **kw: Any) -> list[dict[str, Any]]:
        self.calls.append((kind, namespace))
        if namespace is None and kind in self.forbid:
            raise ForbiddenError("kubernetes", f"list {kind}", "forbidden", status=403)
        return list(self.kube.list(kind, namespace, **kw))


def everywhere(world: World) -> None:
    world.chain = dataclasses.replace(world.chain, workload_consumers=WorkloadConsumers(
        all_namespaces=True))


def test_cluster_wide_discovery_matches_each_workload_to_its_own_namespace_secret(
        world: World) -> None:
    """One list per kind across the cluster; a workload is a reader only of a target Secret
    of its own namespace — the credential's own, or one an ExternalSecret of its path fills
    there — never of a Secret that merely has the same name elsewhere."""
    everywhere(world)
    world.kube.put({"kind": "ExternalSecret", "apiVersion": "external-secrets.io/v1",
                    "metadata": {"name": "df", "namespace": "reports"},
                    "spec": {"target": {"name": "creds"}, "data": [{"secretKey": "PW",
                             "remoteRef": {"key": "infra/dragonfly", "property": "password"}}]}})
    world.kube.put(reading("dragonfly", "warmer", env=True))   # the credential's own Secret
    world.kube.put(reading("elsewhere", "lookalike", env=True))  # same name, another Secret
    copy = reading("reports", "report", env_from=True)
    copy["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [
        {"secretRef": {"name": "creds"}}]
    world.kube.put(copy)
    stray = reading("other", "stray", env_from=True)  # reads "creds" where no copy is made
    stray["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [
        {"secretRef": {"name": "creds"}}]
    world.kube.put(stray)
    kube, col = CountedLists(world.kube), Collector()
    found = discover(world.chain, world.chain.credentials["dragonfly"], kube, col)  # type: ignore[arg-type]
    [check] = col.checks
    assert check.ok and check.check == "consumers.discovered (all namespaces)", check.detail
    assert set(found.found) == {"deployment/dragonfly/warmer", "deployment/reports/report"}
    assert found.external_secrets == {"reports/df": "reports/creds#PW"}
    assert sorted(kube.calls) == sorted([("ExternalSecret", None), ("Deployment", None),
                                         ("StatefulSet", None), ("DaemonSet", None)])


def test_cluster_wide_discovery_rbac_refuses_names_the_grant_and_rotate_rbac(
        world: World, tmp_path: Path) -> None:
    everywhere(world)
    col = Collector()
    discover(world.chain, world.chain.credentials["dragonfly"],
             CountedLists(world.kube, forbid=("Deployment",)), col)  # type: ignore[arg-type]
    [check] = col.checks
    assert not check.ok and check.fatal
    assert "`list deployments`" in check.detail and "ClusterRole" in check.detail
    assert "rotate rbac dragonfly" in check.detail


def test_cluster_wide_discovery_is_granted_by_a_cluster_role() -> None:
    """`rotate rbac` prints the ClusterRole cluster-wide discovery needs, and no Role rule
    that it covers."""
    from rotate.chain.loader import load_chain
    from rotate.engine.access import Permission, permissions_needed
    from rotate.engine.grants import ServiceAccountRef, rbac_objects
    from tests.support.paths import EXAMPLE_CHAIN

    chain = load_chain(EXAMPLE_CHAIN)
    chain = dataclasses.replace(chain, workload_consumers=WorkloadConsumers(
        all_namespaces=True))
    cred = chain.credential("dragonfly")
    perms = permissions_needed(chain, cred)
    for kind in ("Deployment", "StatefulSet", "DaemonSet", "ExternalSecret"):
        assert {Permission(v, kind, None) for v in ("get", "list", "watch", "patch")} <= set(
            perms)
    assert not [p for p in perms if p.kind in ("Deployment", "ExternalSecret", "Event",
                                               "PodDisruptionBudget") and p.namespace]
    objects = rbac_objects(chain, [cred], ServiceAccountRef("rotate-system", "rotate"))
    [role] = [o for o in objects if o["kind"] == "ClusterRole"]
    assert {"apiGroups": ["apps"], "resources": ["deployments"],
            "verbs": ["get", "list", "patch", "watch"]} in role["rules"]
    for obj in objects:
        if obj["kind"] == "Role":
            assert not [r for r in obj["rules"] if "deployments" in r["resources"]], obj

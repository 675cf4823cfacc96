"""Workloads that read the credential's Secret themselves (chain.md "Workloads that read the
Secret"): how each is found, what the plan does with it, and the warnings of a restart that
is an outage anyway.  On the fakes; the lab proves the same from outside
(tests/e2e/test_secret_readers.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rotate.chain.model import WorkloadConsumers
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

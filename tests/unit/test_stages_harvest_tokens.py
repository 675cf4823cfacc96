"""Stage ④: harvest (sources, pointers, schema problems without values), tokens; journal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotate.core.secret import Secret
from rotate.engine.journal import Journal, load
from rotate.engine.model import PlannedStep
from rotate.stages import harvest, tokens
from tests.fakes import FakeConfigCenter, FakeKube, World, make_chain

NEW = "candidate-0123456789abcdefghijklmnopqrstuv"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(make_chain(tmp_path))
    w.setup(password="current-0123456789abcdefghijklmnopqrstu")
    yield w
    w.kube.close()


def test_harvest_builds_document_with_secret_leaves(world: World) -> None:
    doc = harvest.harvest(world.kube, world.chain.services["cart"])
    assert doc.ok, doc.problems
    d = doc.value["dragonfly"]
    assert d["host"] == "dragonfly.dragonfly.svc.cluster.local"
    assert d["port"] == 6379  # named port "redis" resolved through the Service
    assert isinstance(d["password"], Secret) and isinstance(d["url"], Secret)
    assert d["url"].reveal() == ("redis://:current-0123456789abcdefghijklmnopqrstu@"
                                 "dragonfly.dragonfly.svc.cluster.local:6379/0")
    assert doc.value["service"] == {"name": "cart"}
    assert "current-0123456789" not in repr(doc)


def test_harvest_override_uses_candidate(world: World) -> None:
    cred = world.chain.credentials["dragonfly"]
    doc = harvest.harvest(world.kube, world.chain.services["cart"], {cred.secret: Secret(NEW)})
    assert doc.value["dragonfly"]["password"] == Secret(NEW)


def test_schema_problems_name_service_path_reason_never_value(tmp_path: Path) -> None:
    schema = {"type": "object", "required": ["dragonfly", "extra"], "properties": {
        "dragonfly": {"type": "object", "properties": {
            "password": {"type": "string", "minLength": 64},
            "url": {"type": "string", "pattern": "^rediss://"},
            "port": {"type": "string"}}}}}
    w = World(make_chain(tmp_path, schema=schema))
    w.setup(password="leaky-0123456789abcdefghijklmnopqrstuvw")
    try:
        doc = harvest.harvest(w.kube, w.chain.services["cart"])
    finally:
        w.kube.close()
    got = {(p.service, p.path, p.reason) for p in doc.problems}
    assert got == {
        ("cart", "/extra", "required property is missing"),
        ("cart", "/dragonfly/password", "must be at least 64 characters long"),
        ("cart", "/dragonfly/url", "must match pattern ^rediss://"),
        ("cart", "/dragonfly/port", 'must be of type "string"'),
    }
    assert "leaky" not in json.dumps([str(p) for p in doc.problems])


def test_unresolvable_sources_are_problems(world: World) -> None:
    del world.kube.objects[("Secret", "dragonfly", "dragonfly-password-secret")]
    doc = harvest.harvest(world.kube, world.chain.services["cart"])
    paths = {p.path for p in doc.problems}
    assert paths == {"/dragonfly/password", "/dragonfly/url"}


def test_build_refuses_scalar_parent() -> None:
    _, problems = harvest.build("svc", {"/a": 1, "/a/b": 2})
    assert problems and problems[0].path == "/a/b"


def test_tokens_mint_creates_missing_secret_and_revokes() -> None:
    kube, cc = FakeKube(), FakeConfigCenter()
    old = cc.mint_token("cart")
    ids = tokens.current_ids(cc, "cart")
    tid = tokens.mint_and_deliver(cc, kube, "cart", "shop", "cart-config-token", "token")
    assert kube.secret_value("shop", "cart-config-token", "token") == cc.tokens["cart"][-1][
        "token"]
    assert tokens.revoke(cc, "cart", ids) == [old.id]
    assert [t.id for t in cc.list_tokens("cart") if not t.revoked] == [tid]
    kube.close()


def test_journal_fsyncs_records_and_refuses_secrets(tmp_path: Path) -> None:
    j = Journal.open(tmp_path, "r1")
    step = PlannedStep(1, 1, "backend.write", "t", "d", "")
    j.append("run.start", data={"credential": "c", "steps": [step.to_json()]})
    j.append("step.start", step=step)
    with pytest.raises(TypeError):
        j.append("step.done", step=step, data={"nested": [{"v": Secret("s3cr3t-value")}]})
    j.append("step.done", step=step, data={"version": 8})
    j.close()
    text = (tmp_path / "runs" / "r1" / "journal.jsonl").read_text()
    assert "s3cr3t-value" not in text
    with open(tmp_path / "runs" / "r1" / "journal.jsonl", "a") as fh:
        fh.write('{"torn": ')  # a crash mid-line: everything before it stands
    state = load(tmp_path, "r1")
    assert state.steps[0].status == "done" and state.steps[0].data["version"] == 8

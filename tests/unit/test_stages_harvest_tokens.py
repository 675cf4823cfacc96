"""Stage ④: harvest (sources, pointers, schema problems without values), tokens; journal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    tid, newer = tokens.mint_and_deliver(cc, kube, "cart", "shop", "cart-config-token", "token")
    assert newer is None
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


def _token_world() -> tuple[FakeKube, FakeConfigCenter]:
    kube, cc = FakeKube(), FakeConfigCenter()
    tokens.ensure_secret(kube, "shop", "order-config-token")
    return kube, cc


def _held(kube: FakeKube) -> str | None:
    obj = kube.get("Secret", "shop", "order-config-token")
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(tokens.TOKEN_ID_ANNOTATION)


def test_a_delivery_never_replaces_a_newer_token() -> None:
    """Two runs mint at once; the older mint delivers last: it is superseded, revoked at once,
    and the Secret keeps the newer token."""
    kube, cc = _token_world()
    older, newer = cc.mint_token("order", "run-a"), cc.mint_token("order", "run-b")
    assert tokens.deliver(cc, kube, "order", "shop", "order-config-token", "token",
                          newer) is None
    assert tokens.deliver(cc, kube, "order", "shop", "order-config-token", "token",
                          older) == newer.id
    assert _held(kube) == newer.id
    assert kube.secret_value("shop", "order-config-token", "token") == newer.token.reveal()


def test_a_delivery_that_lost_the_race_looks_again() -> None:
    """The Secret changed between the read and the conditional write (409): read again."""
    kube, cc = _token_world()
    older, newer = cc.mint_token("order", "run-a"), cc.mint_token("order", "run-b")
    write = kube.write_secret_key
    raced: list[bool] = []

    def racing(*a: Any, **kw: Any) -> str:
        if not raced:  # the newer run delivers between our read and our write
            raced.append(True)
            write("shop", "order-config-token", "token", newer.token,
                  annotations={tokens.TOKEN_ID_ANNOTATION: newer.id})
        return write(*a, **kw)

    kube.write_secret_key = racing  # type: ignore[method-assign]
    assert tokens.deliver(cc, kube, "order", "shop", "order-config-token", "token",
                          older) == newer.id
    assert _held(kube) == newer.id


def test_one_live_token_per_consumer_after_two_runs_in_either_order() -> None:
    """Run a and run b mint for the same consumer; whichever order they deliver and revoke
    in, exactly one live token is left, and it is the one in the Secret."""
    for deliver_first in ("a", "b"):
        for revoke_first in ("a", "b"):
            kube, cc = _token_world()
            before = cc.mint_token("order", "earlier")
            tokens.deliver(cc, kube, "order", "shop", "order-config-token", "token", before)
            minted = {"a": cc.mint_token("order", "a"), "b": cc.mint_token("order", "b")}
            kept: dict[str, str] = {}
            for run in (deliver_first, "b" if deliver_first == "a" else "a"):
                newer = tokens.deliver(cc, kube, "order", "shop", "order-config-token",
                                       "token", minted[run], older=[before.id])
                if newer is not None:
                    tokens.revoke(cc, "order", [minted[run].id])
                kept[run] = newer or minted[run].id
            for run in (revoke_first, "b" if revoke_first == "a" else "a"):
                older = tokens.older_than(cc, "order", kept[run]) or []
                tokens.revoke(cc, "order", [i for i in older if i != kept[run]])
            live = [t.id for t in cc.list_tokens("order") if not t.revoked]
            assert live == [minted["b"].id] == [_held(kube)], (deliver_first, revoke_first)

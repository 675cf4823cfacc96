"""``rotate status`` on the real engine against the fakes: closed after a run, each broken
link named first, the closing command, and nothing written."""

from __future__ import annotations

from pathlib import Path

from rotate.core.secret import Secret
from rotate.engine.status import CredentialStatus
from tests.fakes import World, assert_no_secret
from tests.support.engine import options, run


def status(world: World, tmp_path: Path) -> CredentialStatus:
    (found,) = world.engine().status(options(tmp_path), ["dragonfly"])
    return found


def _writes(world: World) -> tuple[int, int, int]:
    return world.vault.writes, len(world.kube.patches), sum(
        len(v) for v in world.cc.docs.values())


def test_closed_after_a_rotation_and_status_changes_nothing(world: World,
                                                            tmp_path: Path) -> None:
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    before = _writes(world)
    found = status(world, tmp_path)
    assert found.closed, found.broken
    assert found.command == "" and found.version == 3
    assert _writes(world) == before
    links = [(link.link, link.target) for link in found.links]
    assert links[:3] == [("backend", "secret/infra/dragonfly#password"),
                         ("secret", "dragonfly/dragonfly-password-secret#password"),
                         ("externalsecret", "dragonfly/dragonfly-password")]
    kinds = [link.link for link in found.links]
    assert kinds.count("consumer.document") == 3 and kinds.count("consumer.token") == 3
    assert kinds.count("consumer.pods") == 3 and kinds.count("consumer.readyz") == 3
    assert kinds[-1] == "value.age"
    assert len(found.fingerprint) == 16
    # the same value shows the same fingerprint on every reading
    assert status(world, tmp_path).fingerprint == found.fingerprint
    new = world.vault.current("infra/dragonfly", "password")
    assert_no_secret(repr(found.to_json()), new)


def test_a_hand_written_backend_value_breaks_the_secret_link(world: World,
                                                             tmp_path: Path) -> None:
    assert run(world, tmp_path).status == "succeeded"
    world.vault.versions["infra/dragonfly"].append(
        {"password": "by-hand-0123456789abcdefghijklmnopqrstu", "username": "default"})
    found = status(world, tmp_path)
    assert not found.closed
    broken = found.broken
    assert broken is not None and broken.link == "secret"
    assert broken.target == "dragonfly/dragonfly-password-secret#password"
    assert "≠ backend v4" in broken.detail
    assert found.command == "rotate dragonfly --adopt --confirm"
    assert_no_secret(repr(found.to_json()), "by-hand-0123456789abcdefghijklmnopqrstu")


def test_a_document_left_behind_and_a_second_live_token(world: World, tmp_path: Path) -> None:
    assert run(world, tmp_path).status == "succeeded"
    docs = world.cc.docs[("cart", "bootstrap")]
    docs.append({**docs[0]})  # cart's document back on the old value (a new version)
    world.cc.mint_token("order")
    found = status(world, tmp_path)
    failed = [(link.link, link.target) for link in found.links if not link.ok]
    assert ("consumer.document", "shop/cart bootstrap") in failed
    assert ("consumer.token", "order") in failed
    assert found.broken is not None and found.broken.link == "consumer.document"


def test_the_unfinished_run_is_the_closing_command(world: World, tmp_path: Path) -> None:
    world.eso_mode = "stall"
    report = run(world, tmp_path)
    assert report.exit_code == 11
    found = status(world, tmp_path)
    assert found.broken is not None and found.broken.link == "secret"
    assert found.command == f"rotate resume {report.run_id} --confirm"


def test_value_older_than_max_age(world: World, tmp_path: Path) -> None:
    import dataclasses

    cred = dataclasses.replace(world.chain.credentials["dragonfly"], max_age=60.0)
    world.chain = dataclasses.replace(
        world.chain, credentials={**world.chain.credentials, "dragonfly": cred})
    # the fakes' versions were all written on 2026-01-01
    world.kube.write_secret_key("dragonfly", "dragonfly-password-secret", "password",
                                Secret(world.vault.current("infra/dragonfly", "password")))
    found = status(world, tmp_path)
    age = next(link for link in found.links if link.link == "value.age")
    assert not age.ok and "maxAge 1m00s" in age.detail
    assert found.max_age_seconds == 60.0

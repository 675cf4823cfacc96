"""A 403 from OpenBao, told apart: an invalid or expired token (log in again, VAULT_TOKEN)
or a valid token without the policy (`rotate vault-policy`), in the plan and in doctor.
The same against a real OpenBao: tests/adapters/test_vault_adapter.py."""

from __future__ import annotations

from pathlib import Path

from rotate.core.errors import ForbiddenError
from rotate.engine.model import Check
from tests.fakes import World
from tests.support.engine import options


def _checks(found: tuple[Check, ...] | list[Check]) -> dict[str, Check]:
    return {c.check: c for c in found}


def test_an_expired_token_says_log_in_again(world: World, tmp_path: Path) -> None:
    world.vault.token_expired = True
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    reachable = _checks(plan.preflight)["backend.reachable"]
    assert not plan.ok and not reachable.ok
    assert "the token is invalid or expired" in reachable.detail
    assert "VAULT_TOKEN" in reachable.detail and "bao login" in reachable.detail
    assert "the token is valid" not in reachable.detail

    doctor = _checks(world.engine().doctor(options(tmp_path)))
    assert doctor["backend.reachable"].ok
    token = doctor["backend.token"]
    assert not token.ok and "invalid or expired" in token.detail
    assert "VAULT_TOKEN" in token.detail
    assert "backend.capabilities dragonfly" not in doctor  # not 403 once per credential


def test_a_token_without_the_policy_says_which_policy(world: World, tmp_path: Path) -> None:
    world.vault.token = world.vault.token.__class__(ttl=3600, policies=("default",))
    world.vault.faults.arm("read_metadata", ForbiddenError(
        "vault", "read metadata of secret/infra/dragonfly", "not allowed", status=403))
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    reachable = _checks(plan.preflight)["backend.reachable"]
    assert not reachable.ok
    assert "the token is valid but its policies (default) do not allow this" \
        in reachable.detail
    assert "rotate vault-policy dragonfly | bao policy write rotate -" in reachable.detail
    assert "read metadata of secret/infra/dragonfly" in reachable.detail
    assert "(HTTP 403)" in reachable.detail

    world.vault.capability_map["secret/data/infra/dragonfly"] = ["read"]
    doctor = _checks(world.engine().doctor(options(tmp_path)))
    assert doctor["backend.token"].ok
    assert doctor["backend.token"].detail == \
        "valid, expires in 60m00s (policies: default)"
    caps = doctor["backend.capabilities dragonfly"]
    assert not caps.ok and "update on secret/data/infra/dragonfly" in caps.detail
    assert "`rotate vault-policy dragonfly` prints the policy to apply" in caps.detail


def test_a_valid_token_that_may_not_look_itself_up_is_valid(world: World,
                                                            tmp_path: Path) -> None:
    """A token created with -no-default-policy and `rotate vault-policy`'s policy: the
    lookup is refused, sys/capabilities-self answers."""
    world.vault.faults.arm("lookup_self", ForbiddenError(
        "vault", "look up the token", "not allowed", status=403), times=-1)
    doctor = _checks(world.engine().doctor(options(tmp_path)))
    assert doctor["backend.token"].ok
    assert "valid (its policies do not grant auth/token/lookup-self" in \
        doctor["backend.token"].detail
    assert all(c.ok for c in doctor.values())

"""HvacVault against a real OpenBao (`bao server -dev`, in memory, on 127.0.0.1).

The dev server's root token is passed through the environment (BAO_DEV_ROOT_TOKEN_ID), not
argv, and is a throwaway value of this test module — not a secret of the product.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotate.chain.sections import AuthConfig, BackendConfig
from rotate.clients.vault import AppRoleAuth, HvacVault, vault_from_env
from rotate.core.errors import (
    ClientError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    TemporaryError,
    UsageError,
)
from rotate.core.secret import Secret
from rotate.core.waiting import Deadline, wait_for
from rotate.engine.grants import vault_policy
from rotate.engine.model import Check
from rotate.engine.preflight import doctor_checks
from rotate.engine.vault_token import explain_forbidden
from tests.fakes import make_chain
from tests.support.bao import ROOT_TOKEN, Bao, free_port, start_bao, stop_bao

pytestmark = pytest.mark.bao

VALUE_1 = "first-password-value-0123456789"
VALUE_2 = "second-password-value-9876543210"


@pytest.fixture(scope="module")
def bao(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bao]:
    server = start_bao(tmp_path_factory.mktemp("bao"))
    yield server
    stop_bao(server)


@pytest.fixture
def vault(bao: Bao) -> HvacVault:
    return HvacVault(bao.addr, Secret(ROOT_TOKEN), "secret")


@pytest.fixture
def path() -> str:
    return f"test/{uuid.uuid4().hex[:8]}"


def assert_clean(exc: ClientError, bao: Bao) -> None:
    text = f"{exc} {exc!r} {exc.message} {exc.reason}"
    for forbidden in (ROOT_TOKEN, VALUE_1, VALUE_2, bao.addr, "127.0.0.1", "http"):
        assert forbidden not in text, (forbidden, text)
    assert exc.__cause__ is None and exc.__suppress_context__


# Versions, check-and-set, metadata merging and absent paths are the seam's contract, checked
# on this adapter and on the fake alike: tests/contracts/test_vault_contract.py.  Here: what
# only the real adapter shows.


def test_a_conflict_and_a_not_found_say_nothing_of_the_server(
    vault: HvacVault, bao: Bao, path: str
) -> None:
    vault.write(path, {"password": Secret(VALUE_1)}, cas=0)
    with pytest.raises(ConflictError) as conflict:
        vault.write(path, {"password": Secret(VALUE_2)}, cas=0)  # exists already
    assert_clean(conflict.value, bao)
    with pytest.raises(NotFoundError) as absent:
        vault.read_metadata(path + "-absent")
    assert_clean(absent.value, bao)


def test_custom_metadata_keeps_the_paths_other_settings(
    vault: HvacVault, bao: Bao, path: str
) -> None:
    vault.write(path, {"password": Secret(VALUE_1)}, cas=0)
    bao.api("POST", f"secret/metadata/{path}",
            json={"delete_version_after": "1h", "max_versions": 7,
                  "custom_metadata": {"owner": "platform"}})
    vault.set_custom_metadata(path, {"rotate/run-id": "20261202T141200Z-dragonfly-ab12"})
    assert vault.read_metadata(path).custom_metadata == {
        "owner": "platform", "rotate/run-id": "20261202T141200Z-dragonfly-ab12"}
    raw = bao.api("GET", f"secret/metadata/{path}").json()["data"]
    assert raw["delete_version_after"] == "1h0m0s" and raw["max_versions"] == 7


def test_capabilities_of_a_limited_token(bao: Bao, path: str) -> None:
    policy = f'path "secret/data/{path}" {{ capabilities = ["read"] }}\n'
    bao.api("PUT", f"sys/policies/acl/ro-{path.replace('/', '-')}", json={"policy": policy})
    created = bao.api("POST", "auth/token/create",
                      json={"policies": [f"ro-{path.replace('/', '-')}"], "ttl": "10m"})
    limited_token = created.json()["auth"]["client_token"]
    root = HvacVault(bao.addr, Secret(ROOT_TOKEN))
    root.write(path, {"password": Secret(VALUE_1)}, cas=0)

    limited = HvacVault(bao.addr, Secret(limited_token))
    data_path, other = f"secret/data/{path}", "secret/data/elsewhere"
    assert limited.capabilities([data_path, other]) == {data_path: ["read"], other: ["deny"]}
    assert limited.capabilities([data_path]) == {data_path: ["read"]}
    assert "root" in root.capabilities([other])[other]
    assert limited.read(path)["password"].reveal() == VALUE_1
    with pytest.raises(ForbiddenError) as info:
        limited.write(path, {"password": Secret(VALUE_2)}, cas=1)
    assert limited_token not in str(info.value)
    assert_clean(info.value, bao)
    with pytest.raises(ForbiddenError):
        limited.set_custom_metadata(path, {"a": "b"})


def test_a_wrong_token_is_forbidden(bao: Bao, path: str) -> None:
    wrong = HvacVault(bao.addr, Secret("not-a-token-" + uuid.uuid4().hex))
    with pytest.raises(ForbiddenError) as info:
        wrong.read_metadata(path)
    assert "not-a-token" not in str(info.value)
    assert_clean(info.value, bao)


def test_approle_login(bao: Bao, path: str) -> None:
    mount = f"approle-{uuid.uuid4().hex[:6]}"
    bao.api("POST", f"sys/auth/{mount}", json={"type": "approle"})
    policy = f'path "secret/data/{path}" {{ capabilities = ["create", "update", "read"] }}\n'
    bao.api("PUT", "sys/policies/acl/approle-rw", json={"policy": policy})
    bao.api("POST", f"auth/{mount}/role/rotate", json={"token_policies": ["approle-rw"]})
    role_id = bao.api("GET", f"auth/{mount}/role/rotate/role-id").json()["data"]["role_id"]
    secret_id = bao.api("POST", f"auth/{mount}/role/rotate/secret-id").json()["data"]["secret_id"]

    good = HvacVault(bao.addr, AppRoleAuth(Secret(role_id), Secret(secret_id), mount))
    assert good.write(path, {"password": Secret(VALUE_1)}, cas=0) == 1
    assert good.read(path)["password"].reveal() == VALUE_1

    bad = HvacVault(bao.addr, AppRoleAuth(Secret(role_id), Secret("wrong-" + secret_id), mount))
    with pytest.raises(ClientError) as info:
        bad.read(path)
    assert info.value.status in (400, 403) and not info.value.temporary
    assert secret_id not in str(info.value) and role_id not in str(info.value)
    assert_clean(info.value, bao)


def test_health_and_a_server_that_is_down(bao: Bao, vault: HvacVault) -> None:
    vault.health()
    nowhere = f"http://127.0.0.1:{free_port()}"
    down = HvacVault(nowhere, Secret(ROOT_TOKEN), timeout=2)
    with pytest.raises(TemporaryError) as info:
        down.write("x", {"password": Secret(VALUE_1)}, cas=0)
    assert info.value.reason == f"unreachable at {nowhere}"  # the address, issue 9
    assert ROOT_TOKEN not in str(info.value)
    with pytest.raises(TemporaryError):
        down.health()


def test_a_sealed_server_is_temporary(tmp_path: Path) -> None:
    server = start_bao(tmp_path)
    try:
        vault = HvacVault(server.addr, Secret(ROOT_TOKEN))
        vault.write("sealed/x", {"password": Secret(VALUE_1)}, cas=0)
        server.api("PUT", "sys/seal")
        with pytest.raises(TemporaryError) as info:
            vault.health()
        assert info.value.reason == "sealed"
        with pytest.raises(TemporaryError) as info:
            vault.read("sealed/x")
        assert_clean(info.value, server)
    finally:
        stop_bao(server)
    assert server.proc.poll() is not None


# --------------------------------------------------------------------------- vault_from_env


def backend(method: str = "token", **auth: str) -> BackendConfig:
    return BackendConfig(kv_mount="secret", auth=AuthConfig(method=method, **auth))  # type: ignore[arg-type]


def test_from_env_prefers_bao_variables(bao: Bao, path: str) -> None:
    env = {"BAO_ADDR": bao.addr, "VAULT_ADDR": "http://127.0.0.1:1",
           "BAO_TOKEN": ROOT_TOKEN, "VAULT_TOKEN": "wrong"}
    vault = vault_from_env(backend(), env)
    assert vault.address == bao.addr and vault.mount == "secret"
    assert vault.write(path, {"password": Secret(VALUE_1)}, cas=0) == 1
    only_vault = vault_from_env(backend(), {"VAULT_ADDR": bao.addr, "VAULT_TOKEN": ROOT_TOKEN})
    assert only_vault.read(path)["password"].reveal() == VALUE_1


def test_from_env_address_env_and_token_file(bao: Bao, tmp_path: Path, path: str) -> None:
    (tmp_path / ".vault-token").write_text(ROOT_TOKEN + "\n")
    cfg = BackendConfig(kv_mount="secret", auth=AuthConfig(method="token"),
                        address_env="MY_BAO")
    vault = vault_from_env(cfg, {"MY_BAO": bao.addr, "BAO_ADDR": "http://127.0.0.1:1",
                                 "HOME": str(tmp_path)})
    assert vault.address == bao.addr
    vault.write(path, {"password": Secret(VALUE_1)}, cas=0)


def test_from_env_refuses_incomplete_settings() -> None:
    with pytest.raises(UsageError, match="BAO_ADDR or VAULT_ADDR"):
        vault_from_env(backend(), {"BAO_TOKEN": "t"})
    with pytest.raises(UsageError, match="BAO_TOKEN or VAULT_TOKEN"):
        vault_from_env(backend(), {"BAO_ADDR": "http://127.0.0.1:1", "HOME": "/nonexistent"})
    with pytest.raises(UsageError, match="ROLE_ID and SECRET_ID"):
        vault_from_env(backend("approle", role_id_env="ROLE_ID", secret_id_env="SECRET_ID"),
                       {"BAO_ADDR": "http://127.0.0.1:1", "ROLE_ID": "r"})


def test_from_env_approle(bao: Bao, path: str) -> None:
    mount = f"approle-{uuid.uuid4().hex[:6]}"
    bao.api("POST", f"sys/auth/{mount}", json={"type": "approle"})
    bao.api("POST", f"auth/{mount}/role/r", json={"token_policies": ["default"]})
    role_id = bao.api("GET", f"auth/{mount}/role/r/role-id").json()["data"]["role_id"]
    secret_id = bao.api("POST", f"auth/{mount}/role/r/secret-id").json()["data"]["secret_id"]
    cfg = backend("approle", role_id_env="ROLE_ID", secret_id_env="SECRET_ID", mount=mount)
    vault = vault_from_env(cfg, {"BAO_ADDR": bao.addr, "ROLE_ID": role_id,
                                 "SECRET_ID": secret_id})
    # The default policy has no KV access: login worked, the read is refused by policy.
    with pytest.raises(ForbiddenError):
        vault.read(path)
    assert vault.capabilities([f"secret/data/{path}"]) == {f"secret/data/{path}": ["deny"]}


def test_kubernetes_auth_without_a_service_account_token(bao: Bao, tmp_path: Path) -> None:
    cfg = backend("kubernetes", role="rotate", jwt_path=str(tmp_path / "absent-token"))
    vault = vault_from_env(cfg, {"BAO_ADDR": bao.addr})
    with pytest.raises(ClientError) as info:
        vault.read("anything")
    assert not info.value.temporary
    assert info.value.reason == "cannot read a local credential file"
    # With a token file but no kubernetes auth mount, the server refuses the login.
    (tmp_path / "token").write_text("header.payload.signature\n")
    cfg = backend("kubernetes", role="rotate", jwt_path=str(tmp_path / "token"))
    with pytest.raises(ClientError) as refused:
        vault_from_env(cfg, {"BAO_ADDR": bao.addr}).read("anything")
    assert refused.value.status is not None and not refused.value.temporary
    assert "header.payload" not in str(refused.value)


def test_an_expired_login_token_is_renewed_once(bao: Bao, path: str) -> None:
    mount = f"approle-{uuid.uuid4().hex[:6]}"
    bao.api("POST", f"sys/auth/{mount}", json={"type": "approle"})
    policy = f'path "secret/data/{path}" {{ capabilities = ["create", "update", "read"] }}\n'
    bao.api("PUT", f"sys/policies/acl/{mount}", json={"policy": policy})
    bao.api("POST", f"auth/{mount}/role/r", json={"token_policies": [mount]})
    role_id = bao.api("GET", f"auth/{mount}/role/r/role-id").json()["data"]["role_id"]
    secret_id = bao.api("POST", f"auth/{mount}/role/r/secret-id",
                        json={"secret_id_num_uses": 0}).json()["data"]["secret_id"]
    vault = HvacVault(bao.addr, AppRoleAuth(Secret(role_id), Secret(secret_id), mount))
    vault.write(path, {"password": Secret(VALUE_1)}, cas=0)

    def revoke_approle_tokens() -> int:
        accessors = bao.api("LIST", "auth/token/accessors").json()["data"]["keys"]
        revoked = 0
        for accessor in accessors:
            info = bao.api("POST", "auth/token/lookup-accessor", json={"accessor": accessor})
            if info.json()["data"]["path"].startswith(f"auth/{mount}/"):
                bao.api("POST", "auth/token/revoke-accessor", json={"accessor": accessor})
                revoked += 1
        return revoked

    assert revoke_approle_tokens() == 1
    assert vault.read(path)["password"].reveal() == VALUE_1  # logged in again, transparently
    assert revoke_approle_tokens() == 1  # exactly one new login happened


def _checks(vault: HvacVault, tmp_path: Path) -> dict[str, Check]:
    """doctor's OpenBao checks for the fake world's chain (token auth, credential
    dragonfly), with this vault and neither Kubernetes nor the Config Center."""
    return {c.check: c for c in doctor_checks(make_chain(tmp_path), vault, None, None)}


def test_an_expired_token_is_told_from_a_missing_policy(bao: Bao, tmp_path: Path) -> None:
    """Both are a 403 ``permission denied`` on the KV path; the token's lookup tells which,
    and each says its own fix."""
    root = HvacVault(bao.addr, Secret(ROOT_TOKEN))
    root.write("infra/dragonfly", {"password": Secret(VALUE_1)}, cas=0)
    chain = make_chain(tmp_path)

    def token(**spec: object) -> tuple[HvacVault, str]:
        created = bao.api("POST", "auth/token/create", json={"policies": ["default"], **spec})
        value = created.json()["auth"]["client_token"]
        return HvacVault(bao.addr, Secret(value)), value

    no_policy, value = token(ttl="10m")
    with pytest.raises(ForbiddenError) as refused:
        no_policy.read_metadata("infra/dragonfly")
    said = explain_forbidden(no_policy, chain, ["dragonfly"], refused.value)
    assert "the token is valid but its policies (default) do not allow this" in said.message
    assert "`rotate vault-policy dragonfly` prints the policy to apply" in said.message
    assert value not in said.message and bao.addr not in said.message
    checks = _checks(no_policy, tmp_path)
    assert checks["backend.token"].ok and "(policies: default)" in checks["backend.token"].detail
    assert "expires in" in checks["backend.token"].detail
    caps = checks["backend.capabilities dragonfly"]
    assert not caps.ok and "rotate vault-policy dragonfly" in caps.detail

    short, value = token(ttl="1s", explicit_max_ttl="1s")

    def expired() -> bool | None:
        try:
            short.lookup_self()
        except ForbiddenError:
            return True
        return None

    wait_for(expired, deadline=Deadline.after(30), what="the 1s token to expire")
    with pytest.raises(ForbiddenError) as refused:
        short.read_metadata("infra/dragonfly")
    said = explain_forbidden(short, chain, ["dragonfly"], refused.value)
    assert "the token is invalid or expired" in said.message
    assert "VAULT_TOKEN" in said.message and "the token is valid" not in said.message
    assert value not in said.message and bao.addr not in said.message
    checks = _checks(short, tmp_path)
    assert not checks["backend.token"].ok
    assert "invalid or expired" in checks["backend.token"].detail
    assert "backend.capabilities dragonfly" not in checks


def test_a_token_without_the_default_policy_is_valid(bao: Bao, tmp_path: Path) -> None:
    """`rotate vault-policy`'s policy with -no-default-policy: the lookup is refused, yet the
    token is valid, and doctor passes."""
    chain = make_chain(tmp_path)
    name = f"rotate-{uuid.uuid4().hex[:6]}"
    policy = vault_policy(chain, [chain.credentials["dragonfly"]])
    bao.api("PUT", f"sys/policies/acl/{name}", json={"policy": policy})
    created = bao.api("POST", "auth/token/create",
                      json={"policies": [name], "no_default_policy": True, "ttl": "10m"})
    vault = HvacVault(bao.addr, Secret(created.json()["auth"]["client_token"]))
    with pytest.raises(ForbiddenError):
        vault.lookup_self()
    checks = _checks(vault, tmp_path)
    assert all(c.ok for c in checks.values()), checks
    assert "valid (its policies do not grant auth/token/lookup-self" in \
        checks["backend.token"].detail

"""HvacVault's kubernetes auth against a real OpenBao whose kubernetes auth method asks the
lab's API server (in-process, HTTPS on 127.0.0.1, its own CA) to review the tokens.

The chain of trust is the real one: the lab mints a service-account JWT (TokenRequest, also
through ``kubectl create token``), HvacVault presents it to OpenBao, OpenBao parses its claims
and POSTs a TokenReview to the lab with the reviewer token, and the lab answers from its
signature, expiry, audiences and the ServiceAccount's current uid.  A recording issuer proves
OpenBao really asked (a login that never reached the lab would not count).

The dev server's root token and the lab's bearer tokens are throwaway values of this module,
passed through the environment or HTTP bodies, never argv.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from rotate_lab.cluster.api import kubeconfig, tls
from rotate_lab.cluster.api.apiserver import ApiServer, Identity
from rotate_lab.cluster.api.store import Store
from rotate_lab.cluster.api.tokens import TokenIssuer

from rotate.chain.sections import AuthConfig, BackendConfig
from rotate.clients.vault import HvacVault, KubernetesAuth, vault_from_env
from rotate.core.errors import ClientError, ForbiddenError
from rotate.core.secret import Secret
from tests.support.bao import Bao, start_bao, stop_bao

pytestmark = pytest.mark.bao

ADMIN_TOKEN = "lab-admin-" + uuid.uuid4().hex
RESTRICTED_TOKEN = "lab-restricted-" + uuid.uuid4().hex
NS = "rotate-system"
AUDIENCE = "openbao"
VALUE = "k8s-auth-password-" + uuid.uuid4().hex[:12]


class RecordingIssuer(TokenIssuer):
    """The lab's issuer, remembering each TokenReview verdict (authenticated or the error)."""

    def __init__(self) -> None:
        super().__init__()
        self.verdicts: list[str] = []
        self._mu = threading.Lock()

    def review(self, store: Store, body: dict[str, Any]) -> dict[str, Any]:
        answer = super().review(store, body)
        status = answer["status"]
        with self._mu:
            self.verdicts.append(status["user"]["username"] if status.get("authenticated")
                                 else str(status.get("error")))
        return answer

    def taken(self) -> list[str]:
        with self._mu:
            out, self.verdicts = self.verdicts, []
        return out


@dataclass
class Lab:
    store: Store
    server: ApiServer
    issuer: RecordingIssuer
    ca_pem: bytes
    kubeconfig: Path

    def post(self, path: str, body: dict[str, Any],
             token: str = ADMIN_TOKEN) -> httpx.Response:
        with httpx.Client(verify=_ssl(self.ca_pem), timeout=5) as client:
            return client.post(f"{self.server.url}{path}", json=body,
                               headers={"Authorization": f"Bearer {token}"})

    def mint(self, sa: str, audiences: list[str] | None = None) -> str:
        answer = self.post(f"/api/v1/namespaces/{NS}/serviceaccounts/{sa}/token",
                           {"spec": {"audiences": audiences or [AUDIENCE]}})
        assert answer.status_code == 201, answer.text
        token = answer.json()["status"]["token"]
        assert isinstance(token, str)
        return token

    def service_account(self, name: str) -> str:
        """Create ServiceAccount ``name`` in NS; its uid."""
        obj = self.store.create("ServiceAccount", {"metadata": {"name": name, "namespace": NS}})
        return str(obj["metadata"]["uid"])


def _ssl(ca_pem: bytes) -> Any:
    import ssl

    return ssl.create_default_context(cadata=ca_pem.decode())


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("k8s-lab")
    store = Store()
    store.create("Namespace", {"metadata": {"name": NS}})
    for sa in ("rotate", "other"):
        store.create("ServiceAccount", {"metadata": {"name": sa, "namespace": NS}})
    material = tls.generate()
    issuer = RecordingIssuer()
    server = ApiServer(store, tls=material, tokens=issuer, identities={
        ADMIN_TOKEN: Identity.admin(), RESTRICTED_TOKEN: Identity.restricted()}).start()
    config = kubeconfig.write(tmp / "kubeconfig", server.url, material.ca_pem, ADMIN_TOKEN,
                              RESTRICTED_TOKEN)
    try:
        yield Lab(store, server, issuer, material.ca_pem, config)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def bao(tmp_path_factory: pytest.TempPathFactory, lab: Lab) -> Iterator[Bao]:
    """OpenBao with kubernetes auth at ``kubernetes/`` pointed at the lab, a KV policy, and
    roles ``rotate`` (SA rotate, audience openbao) and ``ephemeral`` (SA ephemeral)."""
    server = start_bao(tmp_path_factory.mktemp("bao-k8s"))
    try:
        server.api("POST", "sys/auth/kubernetes", json={"type": "kubernetes"})
        server.api("POST", "auth/kubernetes/config", json={
            "kubernetes_host": lab.server.url, "kubernetes_ca_cert": lab.ca_pem.decode(),
            "token_reviewer_jwt": ADMIN_TOKEN, "disable_local_ca_jwt": True})
        policy = ('path "secret/data/k8s/*" { capabilities = ["create", "update", "read"] }\n'
                  'path "secret/metadata/k8s/*" { capabilities = ["read"] }\n')
        server.api("PUT", "sys/policies/acl/rotate-k8s", json={"policy": policy})
        for role, sa, audience in (("rotate", "rotate", AUDIENCE), ("ephemeral", "ephemeral", "")):
            server.api("POST", f"auth/kubernetes/role/{role}", json={
                "bound_service_account_names": [sa], "bound_service_account_namespaces": [NS],
                "token_policies": ["rotate-k8s"], "token_ttl": "10m", "audience": audience})
    except BaseException:
        stop_bao(server)
        raise
    lab.issuer.taken()
    yield server
    stop_bao(server)


def token_file(tmp_path: Path, jwt: str) -> str:
    path = tmp_path / f"token-{uuid.uuid4().hex[:6]}"
    path.write_text(jwt + "\n")
    return str(path)


def assert_clean(exc: ClientError, jwt: str, lab: Lab, bao: Bao) -> None:
    text = f"{exc} {exc!r} {exc.message} {exc.reason}"
    for leaked in (jwt, jwt.split(".")[1], lab.server.url, bao.addr, "127.0.0.1", "https"):
        assert leaked not in text, text
    assert exc.__cause__ is None and exc.__suppress_context__


# --------------------------------------------------------------------------- through OpenBao


def test_login_with_a_kubectl_minted_token_reads_and_writes(
    lab: Lab, bao: Bao, tmp_path: Path
) -> None:
    minted = subprocess.run(
        ["kubectl", "--kubeconfig", str(lab.kubeconfig), "create", "token", "rotate", "-n", NS,
         "--audience", AUDIENCE, "--duration", "15m"],
        capture_output=True, text=True, timeout=30, check=True)
    jwt = minted.stdout.strip()
    vault = HvacVault(bao.addr, KubernetesAuth(role="rotate", jwt_path=token_file(tmp_path, jwt),
                                               mount="kubernetes"), "secret")
    path = f"k8s/{uuid.uuid4().hex[:8]}"
    assert vault.write(path, {"password": Secret(VALUE)}, cas=0) == 1
    assert vault.read(path)["password"].reveal() == VALUE
    assert vault.read_metadata(path).current_version == 1
    assert lab.issuer.taken() == [f"system:serviceaccount:{NS}:rotate"]  # one login, reviewed
    with pytest.raises(ForbiddenError):  # the role's policy, not root: no access elsewhere
        vault.read("elsewhere/x")
    # A 403 on a login token earns exactly one fresh login (it might have expired), reviewed.
    assert lab.issuer.taken() == [f"system:serviceaccount:{NS}:rotate"]


def test_vault_from_env_with_a_kubernetes_backend(lab: Lab, bao: Bao, tmp_path: Path) -> None:
    jwt_path = token_file(tmp_path, lab.mint("rotate"))
    cfg = BackendConfig("secret", AuthConfig("kubernetes", role="rotate", mount="kubernetes",
                                             jwt_path=jwt_path))
    vault = vault_from_env(cfg, {"BAO_ADDR": bao.addr})
    path = f"k8s/{uuid.uuid4().hex[:8]}"
    assert vault.write(path, {"password": Secret(VALUE)}, cas=0) == 1
    assert vault.read(path) == {"password": Secret(VALUE)}
    assert lab.issuer.taken() == [f"system:serviceaccount:{NS}:rotate"]


def test_the_service_account_directory_moves_the_default_token_path(
    lab: Lab, bao: Bao, tmp_path: Path
) -> None:
    """ROTATE_SERVICEACCOUNT_DIR (wiring passes it): the default jwtPath is read from there;
    an explicit jwtPath in the chain file still wins."""
    (tmp_path / "token").write_text(lab.mint("rotate") + "\n")
    default = BackendConfig("secret", AuthConfig("kubernetes", role="rotate"))
    vault = vault_from_env(default, {"BAO_ADDR": bao.addr}, serviceaccount_dir=str(tmp_path))
    assert "read" in vault.capabilities(["secret/data/k8s/x"])["secret/data/k8s/x"]
    assert lab.issuer.taken() == [f"system:serviceaccount:{NS}:rotate"]
    explicit = BackendConfig("secret", AuthConfig("kubernetes", role="rotate",
                                                  jwt_path=str(tmp_path / "elsewhere")))
    moved = vault_from_env(explicit, {"BAO_ADDR": bao.addr}, serviceaccount_dir=str(tmp_path))
    assert repr(moved) == repr(vault)  # nothing about paths leaks into repr
    with pytest.raises(ClientError):  # it reads the explicit path, which does not exist
        moved.read("k8s/x")


def test_another_service_accounts_token_is_refused(lab: Lab, bao: Bao, tmp_path: Path) -> None:
    jwt = lab.mint("other")
    vault = HvacVault(bao.addr, KubernetesAuth("rotate", token_file(tmp_path, jwt)), "secret")
    with pytest.raises(ForbiddenError) as info:
        vault.read("k8s/anything")
    assert_clean(info.value, jwt, lab, bao)
    lab.issuer.taken()


def test_a_token_for_another_audience_is_refused(lab: Lab, bao: Bao, tmp_path: Path) -> None:
    jwt = lab.mint("rotate", audiences=["somebody-else"])
    vault = HvacVault(bao.addr, KubernetesAuth("rotate", token_file(tmp_path, jwt)), "secret")
    with pytest.raises(ForbiddenError) as info:
        vault.read("k8s/anything")
    assert_clean(info.value, jwt, lab, bao)
    lab.issuer.taken()


def test_an_expired_token_is_refused(lab: Lab, bao: Bao, tmp_path: Path) -> None:
    uid = str(lab.store.get("ServiceAccount", NS, "rotate")["metadata"]["uid"])
    issuer = lab.server.tokens
    claims = issuer.claims_for(NS, "rotate", uid, [AUDIENCE], 600, now=int(time.time()) - 3600)
    jwt = issuer.sign(claims)
    vault = HvacVault(bao.addr, KubernetesAuth("rotate", token_file(tmp_path, jwt)), "secret")
    with pytest.raises(ForbiddenError) as info:
        vault.read("k8s/anything")
    assert_clean(info.value, jwt, lab, bao)
    # Whether OpenBao checked exp itself or asked the lab, nobody said yes.
    assert not any(v.startswith("system:") for v in lab.issuer.taken())


def test_a_recreated_service_accounts_old_token_is_refused(
    lab: Lab, bao: Bao, tmp_path: Path
) -> None:
    """Revocation: the old token's signature and expiry are fine, only the lab knows the
    ServiceAccount behind it is gone — OpenBao must have asked and been told no."""
    lab.service_account("ephemeral")
    jwt = lab.mint("ephemeral", audiences=["https://kubernetes.default.svc.cluster.local"])
    path = token_file(tmp_path, jwt)
    assert HvacVault(bao.addr, KubernetesAuth("ephemeral", path), "secret").capabilities(
        ["secret/data/k8s/x"]) == {"secret/data/k8s/x": ["create", "read", "update"]}
    assert lab.issuer.taken() == [f"system:serviceaccount:{NS}:ephemeral"]

    lab.store.delete("ServiceAccount", NS, "ephemeral")
    lab.service_account("ephemeral")  # same name, new uid
    with pytest.raises(ForbiddenError) as info:
        HvacVault(bao.addr, KubernetesAuth("ephemeral", path), "secret").read("k8s/x")
    assert_clean(info.value, jwt, lab, bao)
    verdicts = lab.issuer.taken()
    assert len(verdicts) == 1 and "deleted and recreated" in verdicts[0]

    fresh = lab.mint("ephemeral", audiences=["https://kubernetes.default.svc.cluster.local"])
    vault = HvacVault(bao.addr, KubernetesAuth("ephemeral", token_file(tmp_path, fresh)))
    assert "read" in vault.capabilities(["secret/data/k8s/x"])["secret/data/k8s/x"]


# --------------------------------------------------------------------------- the lab's answers


def review(lab: Lab, token: str, audiences: list[str] | None = None,
           bearer: str = ADMIN_TOKEN) -> dict[str, Any]:
    spec: dict[str, Any] = {"token": token}
    if audiences is not None:
        spec["audiences"] = audiences
    answer = lab.post("/apis/authentication.k8s.io/v1/tokenreviews",
                      {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                       "spec": spec}, token=bearer)
    assert answer.status_code == 201, answer.text
    lab.issuer.taken()
    status = answer.json()["status"]
    assert isinstance(status, dict)
    return status


def test_token_review_answers_truthfully(lab: Lab) -> None:
    uid = str(lab.store.get("ServiceAccount", NS, "rotate")["metadata"]["uid"])
    jwt = lab.mint("rotate")
    ok = review(lab, jwt, [AUDIENCE], bearer=RESTRICTED_TOKEN)
    assert ok["authenticated"] is True and ok["audiences"] == [AUDIENCE]
    assert ok["user"]["username"] == f"system:serviceaccount:{NS}:rotate"
    assert ok["user"]["uid"] == uid
    assert set(ok["user"]["groups"]) == {"system:serviceaccounts",
                                         f"system:serviceaccounts:{NS}", "system:authenticated"}
    # no audiences asked: the API server's own (the issuer), which this token lacks
    assert "audiences" in review(lab, jwt)["error"]
    forged = TokenIssuer().sign(TokenIssuer().claims_for(NS, "rotate", uid, [AUDIENCE], 600))
    assert "signature" in review(lab, forged, [AUDIENCE])["error"]
    tampered = jwt.rsplit(".", 1)[0] + "." + forged.rsplit(".", 1)[1]
    assert not review(lab, tampered, [AUDIENCE]).get("authenticated")
    assert "JWT" in review(lab, "not-a-jwt", [AUDIENCE])["error"]
    stale = lab.server.tokens.claims_for(NS, "rotate", uid, [AUDIENCE], 600,
                                         now=int(time.time()) - 3600)
    assert "expired" in review(lab, lab.server.tokens.sign(stale), [AUDIENCE])["error"]


def test_token_request_errors_and_discovery(lab: Lab) -> None:
    assert lab.post(f"/api/v1/namespaces/{NS}/serviceaccounts/absent/token",
                    {"spec": {}}).status_code == 404
    short = lab.post(f"/api/v1/namespaces/{NS}/serviceaccounts/rotate/token",
                     {"spec": {"expirationSeconds": 60}})
    assert short.status_code == 422 and "10 minutes" in short.json()["message"]
    assert lab.post(f"/api/v1/namespaces/{NS}/serviceaccounts/rotate/token", {"spec": {}},
                    token="wrong").status_code == 401
    with httpx.Client(verify=_ssl(lab.ca_pem), timeout=5,
                      headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        got = client.get(f"{lab.server.url}/api/v1/namespaces/{NS}/serviceaccounts/rotate/token")
        assert got.status_code == 405
        core = client.get(f"{lab.server.url}/api/v1").json()["resources"]
        authn = client.get(f"{lab.server.url}/apis/authentication.k8s.io/v1").json()
    token_sub = next(r for r in core if r["name"] == "serviceaccounts/token")
    assert (token_sub["kind"], token_sub["verbs"]) == ("TokenRequest", ["create"])
    assert [(r["name"], r["verbs"], r["namespaced"]) for r in authn["resources"]] == [
        ("tokenreviews", ["create"], False)]

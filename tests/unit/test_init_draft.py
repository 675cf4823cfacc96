"""``rotate init`` against the fakes (rotate/engine/drafting/): the draft validates against
the chain loader, each choice is a ``# guess:`` comment, and no Secret or document value
ever reaches the file."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from rotate.chain.loader import load_chain
from rotate.chain.model import LiteralSource, SecretKeySource, ServiceSource, TemplateSource
from rotate.core.errors import UsageError
from rotate.engine.drafting.files import init_chain
from tests.fakes.configcenter import FakeConfigCenter
from tests.fakes.kube import FakeKube

PASSWORD = "Dragonfly-Pass-0123456789abcdefghijklmn"
ACL = "Acl-Pass-0123456789abcdefghijklmnopqrstu"
ACL_PREVIOUS = "Acl-Previous-0123456789abcdefghijklmnopq"
PG_USER = "app_a"
PG_PASSWORD = "Postgres-Pass-0123456789abcdefghijklmnop"
API_KEY = "Unknown-Api-Key-0123456789abcdefghijklm"
VALUES = (PASSWORD, ACL, ACL_PREVIOUS, PG_PASSWORD, API_KEY)
HOST = "dragonfly.dragonfly.svc.cluster.local"


def _secret(ns: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"kind": "Secret", "metadata": {"name": name, "namespace": ns},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def _es(ns: str, name: str, target: str, data: list[tuple[str, str, str]] | None = None,
        extract: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"secretStoreRef": {"name": "openbao", "kind": "SecretStore"},
                            "target": {"name": target}}
    if data:
        spec["data"] = [{"secretKey": k, "remoteRef": {"key": path, "property": prop}}
                        for k, path, prop in data]
    if extract:
        spec["dataFrom"] = [{"extract": {"key": extract}}]
    return {"kind": "ExternalSecret", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def _workload(kind: str, ns: str, name: str, image: str, *, env: list[dict[str, Any]] | None = None,
              args: list[str] | None = None, **pod: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": image, "env": env or [],
                                 "args": args or []}
    if image == "shop-service":
        container["readinessProbe"] = {"httpGet": {"path": "/readyz", "port": "http"}}
    return {"kind": kind, "metadata": {"name": name, "namespace": ns},
            "spec": {"template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [container], **pod}}}}


def _env(var: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def _service(ns: str, name: str, port: int, port_name: str) -> dict[str, Any]:
    return {"kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"app": name},
                     "ports": [{"name": port_name, "port": port, "targetPort": port_name}]}}


@pytest.fixture
def kube() -> FakeKube:
    k = FakeKube()
    for ns in ("dragonfly", "db", "shop", "apps"):
        k.put({"kind": "Namespace", "metadata": {"name": ns, "namespace": ""}})
    k.put({"kind": "SecretStore", "metadata": {"name": "openbao", "namespace": "dragonfly"},
           "spec": {"provider": {"vault": {"path": "kv", "version": "v2"}}}})
    k.put(_es("dragonfly", "dragonfly-password", "dragonfly-password-secret",
              [("password", "infra/dragonfly", "password")]))
    k.put(_secret("dragonfly", "dragonfly-password-secret", {"password": PASSWORD}))
    k.put(_es("dragonfly", "dragonfly-acl", "dragonfly-acl-secret",
              [("password", "infra/acl", "password"),
               ("password_previous", "infra/acl", "password_previous")]))
    k.put(_secret("dragonfly", "dragonfly-acl-secret",
                  {"password": ACL, "password_previous": ACL_PREVIOUS}))
    k.put(_workload("Deployment", "dragonfly", "dragonfly", "dragonflydb/dragonfly:v1",
                    env=[_env("PW", "dragonfly-password-secret", "password"),
                         _env("ACL", "dragonfly-acl-secret", "password")],
                    args=["--requirepass", "$(PW)", "--user", "search on >$(ACL) ~* +@all"]))
    k.put(_service("dragonfly", "dragonfly", 6379, "redis"))
    k.put(_es("db", "postgres-password", "postgres-password-secret",
              [("username", "infra/postgres", "username"),
               ("password", "infra/postgres", "password")]))
    k.put(_secret("db", "postgres-password-secret",
                  {"username": PG_USER, "password": PG_PASSWORD}))
    k.put(_workload("StatefulSet", "db", "postgres", "postgres:16",
                    volumes=[{"name": "pw", "secret": {"secretName": "postgres-password-secret"}}]))
    k.put(_es("apps", "app-env", "app-env", extract="apps/env"))
    k.put(_secret("apps", "app-env", {"api_token": "x" * 20}))
    k.put(_workload("DaemonSet", "apps", "agent", "agent:1",
                    volumes=[{"name": "p", "projected": {"sources": [
                        {"secret": {"name": "app-env"}}]}}]))
    k.put(_es("apps", "orphan-secret", "orphan", [("password", "apps/orphan", "password")]))
    k.put(_workload("Deployment", "shop", "cart", "shop-service",
                    env=[_env("CONFIG_CENTER_TOKEN", "cart-config-token", "token")]))
    k.put(_service("shop", "cart", 80, "http"))
    return k


@pytest.fixture
def cc() -> FakeConfigCenter:
    c = FakeConfigCenter()
    c.put_key("cart", "bootstrap", {
        "service": {"name": "cart"},
        "dragonfly": {"host": HOST, "port": 6379, "password": PASSWORD,
                      "url": f"redis://:{PASSWORD}@{HOST}:6379/0",
                      "endpoint": f"{HOST}:6379"},
        "postgres": {"user": PG_USER, "password": PG_PASSWORD},
        "api": {"token": API_KEY, "tags": ["a", "b"], "owner": PG_USER},
    }, if_match=None)
    c.put_key("ghost", "bootstrap", {"x": 1}, if_match=None)
    return c


def _guesses(text: str) -> str:
    """The text of the comments, wrapped lines joined."""
    comments = [line.strip()[1:].strip() for line in text.splitlines()
                if line.strip().startswith("#")]
    return " ".join(comments)


def test_the_draft_validates_and_sources_values_from_what_the_cluster_holds(
    kube: FakeKube, cc: FakeConfigCenter, tmp_path: Path
) -> None:
    target = tmp_path / "rotate.yaml"
    result = init_chain(kube, cc, target)
    assert result.written == (tmp_path / "schemas" / "cart.schema.json", target)
    chain = load_chain(target, {})
    assert list(chain.credentials) == ["dragonfly", "dragonfly-acl", "postgres", "app-env"]
    dragonfly = chain.credentials["dragonfly"]
    assert (dragonfly.backend.path, dragonfly.backend.key) == ("infra/dragonfly", "password")
    assert chain.backend.kv_mount == "kv"
    apply = dragonfly.applies[0]
    assert (apply.method, apply.user) == ("redis-acl", "default")
    acl = chain.credentials["dragonfly-acl"].applies[0]
    assert (acl.method, acl.user) == ("redis-acl", "search")
    postgres = chain.credentials["postgres"]
    assert postgres.secret.key == "password" and postgres.applies[0].method == "rollout"
    assert chain.credentials["app-env"].backend.path == "apps/env"
    assert chain.credentials["app-env"].providers[0].kind == "DaemonSet"
    cart = chain.services["cart"]
    assert cart.token.name == "cart-config-token"
    assert (cart.readyz.service, cart.readyz.port, cart.readyz.path) == ("cart", "http",
                                                                         "/readyz")
    values = cart.values
    assert values["/service/name"] == LiteralSource("cart")
    assert values["/dragonfly/host"] == ServiceSource("dragonfly", "dragonfly", 6379, "host")
    assert values["/dragonfly/port"] == ServiceSource("dragonfly", "dragonfly", 6379, "port")
    assert values["/dragonfly/endpoint"] == ServiceSource("dragonfly", "dragonfly", 6379,
                                                          "hostport")
    assert values["/dragonfly/password"] == SecretKeySource(
        "dragonfly", "dragonfly-password-secret", "password")
    assert values["/dragonfly/url"] == TemplateSource(
        "redis://:{/dragonfly/password}@{/dragonfly/host}:{/dragonfly/port}/0")
    assert values["/postgres/user"] == SecretKeySource("db", "postgres-password-secret",
                                                       "username")
    assert "/api/token" not in values and values["/api/tags"] == LiteralSource(["a", "b"])
    assert values["/api/owner"] == values["/postgres/user"]  # by value: a guess (below)
    assert json.loads((tmp_path / "schemas" / "cart.schema.json").read_text()) == {}


def test_each_choice_is_a_guess_comment_and_what_was_left_out_is_said(
    kube: FakeKube, cc: FakeConfigCenter
) -> None:
    text = init_chain(kube, cc, None).text
    guesses = _guesses(text)
    for expected in ("--requirepass", "ACL user `search`", "PostgreSQL reads its password",
                     "among the keys password, username",
                     "kubectl create namespace rotate-system", "40 alphanumeric",
                     "/api/token looks like a credential", "token (BAO_TOKEN",
                     "the value equals db/postgres-password-secret#username"):
        assert expected in guesses, expected
    assert "not drafted: ExternalSecret apps/orphan-secret left out" in text
    assert "not drafted: Config Center service ghost left out" in text


def test_no_value_reaches_the_file_or_its_comments(kube: FakeKube, cc: FakeConfigCenter,
                                                   tmp_path: Path) -> None:
    result = init_chain(kube, cc, tmp_path / "rotate.yaml")
    written = "".join(p.read_text() for p in result.written)
    for value in VALUES:
        assert value not in written
    assert repr(result.draft).count(PASSWORD) == 0


def test_an_existing_file_is_kept_unless_forced(kube: FakeKube, cc: FakeConfigCenter,
                                                tmp_path: Path) -> None:
    target = tmp_path / "rotate.yaml"
    target.write_text("mine\n")
    with pytest.raises(UsageError) as info:
        init_chain(kube, cc, target)
    assert str(info.value) == (f"refusing to overwrite {target}: pass --force to replace "
                               "them, or --chain to write elsewhere")
    assert target.read_text() == "mine\n"
    assert not (tmp_path / "schemas").exists()  # a refusal writes nothing at all
    init_chain(kube, cc, target, force=True)
    assert load_chain(target, {}).credentials
    with pytest.raises(UsageError) as info:
        init_chain(kube, cc, target)
    assert f"overwrite {target} and 1 schema file(s) in {tmp_path / 'schemas'}" \
        in str(info.value)


def test_without_a_config_center_only_credentials_are_drafted(kube: FakeKube,
                                                              tmp_path: Path) -> None:
    target = tmp_path / "rotate.yaml"
    result = init_chain(kube, None, target)
    assert result.written == (target,)
    assert not load_chain(target, {}).services
    assert "no Config Center was read" in result.text


def test_overlap_is_guessed_from_a_previous_key_on_a_rollout_provider(
    kube: FakeKube, tmp_path: Path
) -> None:
    dragonfly = kube.get("Deployment", "dragonfly", "dragonfly")
    dragonfly["spec"]["template"]["spec"]["containers"][0]["args"] = []
    kube.put(dragonfly)
    target = tmp_path / "rotate.yaml"
    init_chain(kube, None, target)
    acl = load_chain(target, {}).credentials["dragonfly-acl"]
    assert acl.strategy.value == "overlap" and acl.overlap is not None
    assert acl.overlap.previous_key == "password_previous"


def test_nothing_to_draft_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="nothing to draft"):
        init_chain(FakeKube(), None, tmp_path / "rotate.yaml")
    assert not (tmp_path / "rotate.yaml").exists()

"""KubeClient against the lab's API server (Store + ApiServer, in-process, HTTPS on 127.0.0.1)
through a real kubeconfig, with an admin and a restricted identity.

The service proxy reaches a small HTTP server this test starts on 127.0.0.1.
"""

from __future__ import annotations

import base64
import logging
import secrets
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from rotate_lab.cluster.api import kubeconfig, tls
from rotate_lab.cluster.api import store as store_mod

from rotate.clients.kube import KubeClient
from rotate.core.errors import (
    ClientError,
    ConflictError,
    ForbiddenError,
    RejectedError,
    TemporaryError,
    UsageError,
)
from rotate.core.secret import Secret
from tests.support.kube_apiserver import Lab, deployment, start_lab

PASSWORD = "Kube-Secret-Value-" + secrets.token_hex(8)


class _Readyz(BaseHTTPRequestHandler):
    #: ``GET /meet`` answers once this many requests are open at once
    meeting: threading.Barrier | None = None

    def do_GET(self) -> None:
        if self.path == "/meet" and self.meeting is not None:
            self.meeting.wait()
        status = 200 if self.path in ("/readyz", "/meet") else 503
        body = b"ok" if status == 200 else b"not ready"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def material() -> tls.TlsMaterial:
    return tls.generate()


@pytest.fixture(scope="module")
def service() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Readyz)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                              daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture
def lab(tmp_path: Path, material: tls.TlsMaterial,
        service: ThreadingHTTPServer) -> Iterator[Lab]:
    lab = start_lab(tmp_path, material, int(service.server_address[1]))
    yield lab
    lab.api.stop()


def make_secret(kube: KubeClient) -> dict[str, Any]:
    encoded = base64.b64encode(PASSWORD.encode()).decode()
    return kube.create("Secret", "dragonfly", {
        "metadata": {"name": "dragonfly-password-secret",
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration":
                                     f'{{"data":{{"password":"{encoded}"}}}}'}},
        "data": {"password": encoded}, "type": "Opaque"})


def assert_clean(exc: ClientError, lab: Lab) -> None:
    text = f"{exc} {exc!r} {exc.details}"
    encoded = base64.b64encode(PASSWORD.encode()).decode()
    for forbidden in (PASSWORD, encoded, lab.admin_token, lab.restricted_token, lab.api.url):
        assert forbidden not in text, (forbidden, text)
    assert exc.__context__ is None or exc.__suppress_context__


# CRUD, generations, stale replaces, Secret stripping, one-key reads and writes and watch
# replays are the seam's contract, checked on this adapter and on the fake alike:
# tests/contracts/test_kube_contract.py.  Here: what only the real adapter shows.


def test_patch_types_and_a_clean_conflict(lab: Lab) -> None:
    kube = lab.client()
    assert kube.server == lab.api.url
    kube.create("Deployment", "shop", deployment("cart"))
    assert [d["kind"] for d in kube.list("Deployment", None)] == ["Deployment"]
    restarted = kube.patch("Deployment", "shop", "cart", {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-02T14:00:00.123Z"}}}}},
        patch_type="strategic")
    assert restarted["metadata"]["generation"] == 2
    jsonp = kube.patch("Deployment", "shop", "cart",
                       [{"op": "replace", "path": "/spec/replicas", "value": 3}],
                       patch_type="json")
    assert jsonp["spec"]["replicas"] == 3
    current = kube.get("Deployment", "shop", "cart")
    current["spec"]["replicas"] = 2
    kube.replace("Deployment", "shop", "cart", current)
    with pytest.raises(ConflictError) as info:  # stale resourceVersion
        kube.replace("Deployment", "shop", "cart", current)
    assert info.value.status == 409
    assert_clean(info.value, lab)


def test_last_applied_configuration_is_stripped_and_writes_reach_the_store(lab: Lab) -> None:
    kube = lab.client()
    make_secret(kube)
    for obj in (kube.get("Secret", "dragonfly", "dragonfly-password-secret"),
                *kube.list("Secret", "dragonfly")):
        assert "kubectl.kubernetes.io/last-applied-configuration" not in (
            obj["metadata"].get("annotations") or {})
    kube.write_secret_key("dragonfly", "dragonfly-password-secret", "password",
                          Secret("new-" + PASSWORD))
    raw = lab.store.get("Secret", "dragonfly", "dragonfly-password-secret")
    assert base64.b64decode(raw["data"]["password"]).decode() == "new-" + PASSWORD
    with pytest.raises(ConflictError) as info:  # AlreadyExists: the body is not echoed
        make_secret(kube)
    assert_clean(info.value, lab)


def test_watch_streams_live_events(lab: Lab) -> None:
    kube = lab.client()
    kube.create("Deployment", "shop", deployment("cart"))
    rv = kube.get("Deployment", "shop", "cart")["metadata"]["resourceVersion"]
    stream = kube.watch("Deployment", "shop", resource_version=rv, timeout_seconds=5)
    done = threading.Event()

    def writer() -> None:
        # Wait (condition with deadline) until the server serves our watch, then change.
        from rotate.core.waiting import Deadline, wait_for
        wait_for(lambda: lab.api.open_watches or None, deadline=Deadline.after(5),
                 what="watch open")
        lab.store.patch("Deployment", "shop", "cart",
                        {"metadata": {"annotations": {"x": "1"}}}, "merge")
        done.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    first = next(e for e in stream if e.type != "BOOKMARK")
    assert first.type == "MODIFIED" and first.object["metadata"]["annotations"]["x"] == "1"
    stream.close()  # type: ignore[attr-defined]
    thread.join(5)
    assert done.is_set()


def test_watch_from_an_expired_version_is_temporary(
    tmp_path: Path, material: tls.TlsMaterial, service: ThreadingHTTPServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(store_mod, "HISTORY", 3)
    small = start_lab(tmp_path, material, int(service.server_address[1]))
    try:
        kube = small.client()
        first = kube.create("ConfigMap", "shop", {"metadata": {"name": "c"}})
        for i in range(6):
            kube.patch("ConfigMap", "shop", "c", {"data": {"n": str(i)}})
        with pytest.raises(TemporaryError) as info:
            list(kube.watch("ConfigMap", "shop",
                            resource_version=first["metadata"]["resourceVersion"],
                            timeout_seconds=1))
        assert info.value.status == 410
    finally:
        small.api.stop()


def test_can_i_and_a_restricted_identity(lab: Lab) -> None:
    admin, restricted = lab.client(), lab.client(kubeconfig.RESTRICTED_CONTEXT)
    make_secret(admin)
    admin.create("Deployment", "shop", deployment("cart"))
    assert admin.can_i("get", "Secret", "dragonfly")
    assert admin.can_i("patch", "Deployment", "shop")
    assert not restricted.can_i("get", "Secret", "dragonfly")
    assert not restricted.can_i("patch", "Deployment", "shop")
    assert restricted.can_i("get", "Deployment", "shop")
    assert restricted.can_i("watch", "ExternalSecret", "dragonfly")
    assert not restricted.can_i("create", "Lease", "rotate-system")

    with pytest.raises(ForbiddenError) as info:
        restricted.read_secret_key("dragonfly", "dragonfly-password-secret", "password")
    assert info.value.status == 403
    assert_clean(info.value, lab)
    with pytest.raises(ForbiddenError):
        restricted.patch("Deployment", "shop", "cart", {"metadata": {"labels": {"a": "b"}}})
    assert restricted.get("Deployment", "shop", "cart")["metadata"]["name"] == "cart"


def test_invalid_object_is_rejected_with_fields_only(lab: Lab) -> None:
    kube = lab.client()
    bad = deployment("cart")
    bad["spec"]["template"]["metadata"]["labels"] = {"app": PASSWORD}
    with pytest.raises(RejectedError) as info:
        kube.create("Deployment", "shop", bad)
    assert info.value.status == 422
    assert any(field.startswith("spec.") for field, _ in info.value.details)
    assert_clean(info.value, lab)


def test_service_proxy(lab: Lab) -> None:
    kube = lab.client()
    assert kube.proxy_get("shop", "cart", "http", "/readyz") == 200
    assert kube.proxy_get("shop", "cart", 8080, "/broken") == 503
    assert kube.proxy_get("shop", "nothing", "http", "/readyz") == 503  # no endpoints


def test_requests_at_once_keep_their_connections(
        lab: Lab, caplog: pytest.LogCaptureFixture) -> None:
    # Preflight's parts fan out at once and a run adds its lanes and watches: up to ~30
    # requests in flight.  Each connection goes back to the pool afterwards; a smaller pool
    # discards the extra ones, and urllib3 logs a warning for each on the user's stderr.
    kube, n = lab.client(), 24
    _Readyz.meeting = threading.Barrier(n, timeout=10)
    try:
        with caplog.at_level(logging.WARNING, logger="urllib3"), \
                ThreadPoolExecutor(max_workers=n) as pool:
            codes = list(pool.map(lambda _i: kube.proxy_get("shop", "cart", "http", "/meet"),
                                  range(n)))
    finally:
        _Readyz.meeting = None
    assert codes == [200] * n
    assert [r.getMessage() for r in caplog.records if "pool is full" in r.getMessage()] == []


def test_unreachable_server_is_temporary(lab: Lab) -> None:
    kube = lab.client()
    lab.api.stop()
    with pytest.raises(TemporaryError) as info:
        kube.get("Deployment", "shop", "cart")
    assert info.value.reason == f"unreachable at {lab.api.url}"  # the address, issue 9
    assert lab.admin_token not in str(info.value)


def test_bad_kubeconfig_or_context_is_a_usage_error(lab: Lab, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="context nope"):
        KubeClient(str(lab.kubeconfig), "nope")
    with pytest.raises(UsageError):
        KubeClient(str(tmp_path / f"absent-{uuid.uuid4().hex}"), None)

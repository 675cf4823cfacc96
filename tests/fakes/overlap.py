"""A fake shop whose provider accepts two values (the Secret's ``password`` and
``password_previous``, as a Redis ACL user with two passwords does), recording every moment
a consumer runs with a value the provider no longer accepts — the failure the overlap
strategy exists to prevent (tests/unit/test_engine_overlap.py, test_waves.py)."""

from __future__ import annotations

import base64

from rotate.clients.seams import ReadyzTarget
from rotate.core.secret import Secret
from tests.fakes.kube import FakeKube
from tests.fakes.world import CONSUMERS, World

PATH = "infra/dragonfly"
PREV = "password_previous"
OLD = "old-password-0123456789abcdefghijklmn"


class OverlapWorld(World):
    """The provider accepts the Secret's password *and* password_previous."""

    cut_off: list[str]

    def setup(self, password: str = OLD) -> None:
        super().setup(password)
        self.cut_off = []
        for data in self.vault.versions[PATH]:
            data[PREV] = data["password"]
        es = self.kube.raw("ExternalSecret", "dragonfly", "dragonfly-password")
        es["spec"]["data"] = [
            {"secretKey": k, "remoteRef": {"key": PATH, "property": k}}
            for k in ("password", PREV)]
        sec = self.kube.raw("Secret", "dragonfly", "dragonfly-password-secret")
        sec["data"][PREV] = base64.b64encode(password.encode()).decode()
        self.running["dragonfly#previous"] = password

    def accepted(self) -> set[str]:
        return {self.running["dragonfly"], self.running["dragonfly#previous"]}

    def _eso(self, kube: FakeKube, kind: str, ns: str, name: str) -> None:
        super()._eso(kube, kind, ns, name)
        if kind == "ExternalSecret" and self.eso_mode == "ok":
            kube.write_secret_key("dragonfly", "dragonfly-password-secret", PREV,
                                  Secret(self.vault.current(PATH, PREV)))

    def _rollout(self, kube: FakeKube, kind: str, ns: str, name: str) -> None:
        before = len(self.rollouts)
        super()._rollout(kube, kind, ns, name)
        if len(self.rollouts) == before:
            return
        if name == "dragonfly":
            self.running["dragonfly#previous"] = kube.secret_value(
                "dragonfly", "dragonfly-password-secret", PREV) or ""
        for consumer in CONSUMERS:
            if self.running.get(consumer) not in self.accepted():
                self.cut_off.append(f"{consumer} after {ns}/{name} rolled")

    def _readyz(self, target: ReadyzTarget) -> int:
        name = target.service
        if name in CONSUMERS and self.running.get(name) not in self.accepted():
            return 503
        token = self.running.get(f"{name}#token")
        if token is not None and not self.cc.valid_token(name, token):
            return 503
        return 200

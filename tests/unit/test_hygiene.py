"""Secret hygiene end to end at unit level: the CLI over the real engine, on the fakes.

A rotation that succeeds and rotations that fail with an adapter exception whose *text*
carries secrets (the way hvac/httpx/kubernetes exceptions carry URLs and bodies) must leave
none of these anywhere an operator or a ticket can see: the old and new values, every
Config Center token, the admin tokens from the environment.  Scanned: stdout and stderr of
the CLI (text and JSON), the journal files, the report JSON of ``rotate show``, everything
logged at DEBUG, and what the run left in the cluster outside Secret data (annotations,
labels, status, events) and in the backend's custom metadata.  Then the last lines of
defence: the journal refusing a Secret, and the masked ``repr`` of every value that holds one.

The lab e2e test (tests/e2e/test_rotation.py) scans the same channels on the real lab; this
one reaches the failure paths, which the lab cannot provoke on demand.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from rotate.cli.app import app
from rotate.cli.state import CliState
from rotate.clients.configcenter import HttpConfigCenter
from rotate.clients.seams import MintedToken, VersionedDoc
from rotate.clients.vault import AppRoleAuth, TokenAuth
from rotate.core.secret import Secret
from rotate.engine.journal import Journal
from rotate.stages.harvest import Document
from tests.fakes import World
from tests.unit.engine_support import world_fixture  # noqa: F401 - fixture

NEW = "NEW-value-from-stdin-4f1c9a7e2b6d8c0e5a3f"
OLD = "old-password-0123456789abcdefghijklmn"
FIRST = "first-password-0123456789abcdefghijkl"
ENV_TOKENS = {"CONFIG_CENTER_TOKEN": "cc-admin-token-6b2e9d41a7f3",
              "BAO_TOKEN": "bao-root-token-93c5e1d07a28"}


def _cli(w: World, tmp_path: Path, *args: str, stdin: str | None = None) -> Result:
    """The real CLI over a real Engine handed the world's fakes."""
    env = {"NO_COLOR": "1", "COLUMNS": "100", "ROTATE_DEBUG": None, **ENV_TOKENS}
    common = ["--chain", str(tmp_path / "rotate.yaml"), "--state-dir", str(tmp_path / "state")]
    return CliRunner().invoke(app, [*args, *common], input=stdin, env=env,
                              obj=CliState(engine=w.engine), catch_exceptions=False)


def _secrets(w: World) -> list[str]:
    """Every secret the world holds now: all backend values, all tokens ever minted."""
    values = {v for versions in w.vault.versions.values() for data in versions
              for v in data.values() if v != "default"}
    values |= {t["token"] for ts in w.cc.tokens.values() for t in ts}
    values |= {NEW, OLD, FIRST, *ENV_TOKENS.values()}
    return sorted(values)


def _cluster_text(w: World) -> str:
    """The fake cluster as an operator sees it with ``get -o yaml``: Secret data excluded."""
    def public(obj: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in obj.items() if not (obj.get("kind") == "Secret" and k == "data")}

    objects = [public(o) for o in w.kube.objects.values()]
    events = [public(obj) for _rv, _e, _key, obj in w.kube.events]
    return json.dumps([objects, events, w.vault.custom, w.kube.patches], default=str)


def _journals(tmp_path: Path) -> str:
    return "\n".join(p.read_text() for p in sorted((tmp_path / "state").rglob("*")) if p.is_file())


def _scan(w: World, tmp_path: Path, caplog: pytest.LogCaptureFixture, *results: Result,
          ) -> None:
    run_ids = [p.name for p in (tmp_path / "state" / "runs").iterdir()]
    shown = [_cli(w, tmp_path, "show", run_id, "-o", "json") for run_id in run_ids]
    listed = _cli(w, tmp_path, "runs", "-o", "json")
    channels = {
        "journal": _journals(tmp_path),
        "log": caplog.text + "".join(repr(r.args) for r in caplog.records),
        "cluster": _cluster_text(w),
    }
    for i, r in enumerate([*results, *shown, listed]):
        channels[f"stdout[{i}]"] = r.stdout
        channels[f"stderr[{i}]"] = r.stderr
    for secret in _secrets(w):
        for name, text in channels.items():
            if secret in text:  # not `assert … in`: pytest would print the secret
                pytest.fail(f"a secret ({len(secret)} chars) leaked into {name}")


def test_a_successful_rotation_leaks_nothing(
    world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    plan = _cli(world, tmp_path, "dragonfly", "-o", "json")
    assert plan.exit_code == 0, plan.stderr
    done = _cli(world, tmp_path, "dragonfly", "--confirm", "--value-stdin", stdin=NEW + "\n")
    assert done.exit_code == 0, done.stderr
    # the value did go everywhere it should (so the scan below is not vacuous)
    assert world.vault.current("infra/dragonfly", "password") == NEW
    assert world.kube.secret_value("dragonfly", "dragonfly-password-secret", "password") == NEW
    assert world.running["cart"] == NEW
    run_id = json.loads(_cli(world, tmp_path, "runs", "-o", "json").stdout)["runs"][0]["run_id"]
    back = _cli(world, tmp_path, "rollback", run_id, "--confirm", "-o", "json")
    assert back.exit_code == 0, back.stderr
    assert world.vault.current("infra/dragonfly", "password") == OLD
    _scan(world, tmp_path, caplog, plan, done, back)


def _leaky(*values: str) -> RuntimeError:
    """What a library exception looks like: the request, body and all."""
    return RuntimeError("PUT https://cc.example/v1/x body=" + json.dumps(list(values)))


def _break_backend(w: World) -> None:
    w.vault.faults.arm("write", _leaky(NEW, OLD))


def _break_config_write(w: World) -> None:
    w.cc.faults.arm("put_key", _leaky(NEW, OLD), times=-1)


def _break_token_delivery(w: World) -> None:
    write = w.kube.write_secret_key

    def leaky_write(namespace: str, name: str, key: str, value: Secret) -> str:
        if name.endswith("-config-token"):
            raise _leaky(value.reveal())
        return write(namespace, name, key, value)

    w.kube.write_secret_key = leaky_write  # type: ignore[method-assign]


def _break_readyz(w: World) -> None:
    def leaky_status(target: Any) -> int:
        raise _leaky(NEW, w.running.get(f"{target.service}#token", ""))

    w.readyz.answer = leaky_status


@pytest.mark.parametrize(("breaker", "failed_kind"), [
    (_break_backend, "backend.write"),
    (_break_config_write, "config.write"),
    (_break_token_delivery, "token.mint"),
    (_break_readyz, "readyz.check"),
])
@pytest.mark.parametrize("output", ["text", "json"])
def test_an_adapter_exception_carrying_secrets_is_not_surfaced(
    world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture,
    breaker: Callable[[World], None], failed_kind: str, output: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    breaker(world)
    failed = _cli(world, tmp_path, "dragonfly", "--confirm", "--value-stdin", "-o", output,
                  stdin=NEW + "\n")
    # not a RotateError: a bug in an adapter, reported by type only
    assert failed.exit_code == 1, failed.stderr
    assert failed_kind in failed.stderr
    assert "internal error (RuntimeError)" in failed.stderr
    assert "rotate resume " in failed.stderr  # the way out is still printed
    if output == "json":
        report = json.loads(failed.stdout)
        assert report["status"] == "failed"
        assert {s["kind"] for s in report["steps"] if s["status"] == "failed"} == {failed_kind}
    _scan(world, tmp_path, caplog, failed)


# --------------------------------------------------------------------------- the last lines


@pytest.mark.parametrize("data", [
    {"value": Secret(NEW)},
    {"nested": {"list": [1, {"deeper": Secret(NEW)}]}},
    {"tuple": ("a", Secret(NEW))},
    {"holder": MintedToken("tok-1", Secret(NEW), "")},  # not JSON: refused by type
])
def test_the_journal_refuses_a_secret_anywhere_in_a_record(
    tmp_path: Path, data: dict[str, Any],
) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    try:
        with pytest.raises(TypeError):
            journal.append("step.progress", data=data)
        journal.append("step.progress", data={"version": 3})
    finally:
        journal.close()
    lines = (tmp_path / "journal.jsonl").read_text().splitlines()
    assert [json.loads(line)["data"] for line in lines] == [{"version": 3}]


def test_values_that_hold_secrets_show_a_mask() -> None:
    doc = {"dragonfly": {"password": NEW, "url": f"redis://:{NEW}@h:6379/0"}}
    holders: list[object] = [
        VersionedDoc(3, doc),
        Document("cart", {"dragonfly": {"password": Secret(NEW)}}),
        MintedToken("tok-1", Secret(NEW), "2027-01-01T00:00:00Z"),
        TokenAuth(Secret(NEW)),
        AppRoleAuth(Secret(NEW), Secret(NEW)),
        HttpConfigCenter("http://127.0.0.1:1", Secret(NEW)),
    ]
    for holder in holders:
        for text in (repr(holder), str(holder), f"{holder}", f"{holder!r}"):
            assert NEW not in text, type(holder).__name__


def test_a_background_thread_dying_of_a_leaky_exception_shows_its_type_only(
    world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    died = threading.Event()

    def leaky_watch(*args: Any, **kwargs: Any) -> Any:
        died.set()
        raise _leaky(NEW, OLD)  # a watch thread (WatchPause) has no handler for this

    world.kube.watch = leaky_watch  # type: ignore[method-assign]
    done = _cli(world, tmp_path, "dragonfly", "--confirm", "--value-stdin", stdin=NEW + "\n")
    assert died.is_set()
    assert done.exit_code == 0, done.stderr  # the watch only speeds waiting up
    assert "background thread watch-" in done.stderr
    assert "internal error (a bug): builtins.RuntimeError" in done.stderr
    assert "Traceback" not in done.stderr
    _scan(world, tmp_path, caplog, done)

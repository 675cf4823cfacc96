"""``rotate watch``'s command line (rotate.cli.commands.watch) against the fake engine: what
reaches the engine, and bad input as exit 2.  The watcher itself: test_engine_watcher.py and
tests/e2e/test_watch.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.fakes.engine import FakeEngine
from tests.support.cli import invoke


def test_the_watch_gets_its_settings_and_the_location_options_its_runs_repeat(
        tmp_path: Path) -> None:
    chain = tmp_path / "rotate.yaml"
    chain.write_text("x")
    engine = FakeEngine()
    res = invoke(["watch", "dragonfly", "--chain", str(chain), "--listen", "0.0.0.0:9090",
                  "--lease-seconds", "5", "--resync", "30", "--context", "lab",
                  "--state-dir", str(tmp_path / "state")], engine)
    assert res.exit_code == 0, res.output
    [(_, (options, credentials, settings, child))] = [
        c for c in engine.calls if c[0] == "watch"]
    assert credentials == ("dragonfly",) and options.context == "lab"
    assert (settings.host, settings.port, settings.lease_seconds, settings.resync) == (
        "0.0.0.0", 9090, 5, 30.0)
    assert child == ["--chain", str(chain), "--state-dir", str(tmp_path / "state"),
                     "--context", "lab"]
    assert "watch: leading: this replica acts now" in res.output
    assert "watch: stopped" in res.output


def test_a_listen_address_that_is_not_host_port_is_exit_2(tmp_path: Path) -> None:
    chain = tmp_path / "rotate.yaml"
    chain.write_text("x")
    for bad in ("8080", "host:", ":8080", "host:99999", "host:http"):
        res = invoke(["watch", "--chain", str(chain), "--listen", bad])
        assert res.exit_code == 2, (bad, res.output)
        assert "is not HOST:PORT" in res.output
        assert "Traceback" not in res.output


def test_without_kopf_the_watch_names_the_extra_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from rotate.clients.drivers import watch_driver_missing

    assert watch_driver_missing() == ""
    monkeypatch.setitem(sys.modules, "kopf", None)  # an import of kopf now fails
    assert watch_driver_missing() == ("rotate watch needs kopf, which is not installed: "
                                      "pip install 'rotate[watch]'")

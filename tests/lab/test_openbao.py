"""The lab's OpenBao: the real bao binary, initialised, unsealed, KV v2, restartable."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import httpx
import pytest
from rotate_lab.host import processes
from rotate_lab.systems import openbao

pytestmark = pytest.mark.bao


def test_start_init_write_restart_stop(tmp_path: Path) -> None:
    started = time.monotonic()
    bao = openbao.start(tmp_path)
    try:
        assert bao.alive()
        assert bao.addr.startswith("http://127.0.0.1:")
        assert bao.root_token
        init = tmp_path / "openbao" / "init.json"
        assert stat.S_IMODE(os.stat(init).st_mode) == 0o600
        health = httpx.get(f"{bao.addr}/v1/sys/health").json()
        assert health["initialized"] and not health["sealed"]

        v1 = openbao.put_secret(bao.addr, bao.root_token, "infra/dragonfly",
                                {"password": "first-value-0123456789"})
        v2 = openbao.put_secret(bao.addr, bao.root_token, "infra/dragonfly",
                                {"password": "second-value-0123456789"})
        assert (v1, v2) == (1, 2)
        assert openbao.get_secret(bao.addr, bao.root_token, "infra/dragonfly") == (
            {"password": "second-value-0123456789"}, 2)
        # a wrong token is refused — the server really checks
        with pytest.raises(openbao.BaoError):
            openbao.get_secret(bao.addr, "nope", "infra/dragonfly")
    finally:
        bao.stop()
    assert not processes.alive(bao.pid)
    assert time.monotonic() - started < 15

    again = openbao.start(tmp_path)
    try:
        assert again.port == bao.port  # published addresses stay true
        assert again.root_token == bao.root_token
        data, version = openbao.get_secret(again.addr, again.root_token, "infra/dragonfly",
                                           version=1)
        assert (data, version) == ({"password": "first-value-0123456789"}, 1)
        assert openbao.get_secret(again.addr, again.root_token, "infra/dragonfly")[1] == 2
    finally:
        again.stop()
    assert not processes.alive(again.pid)
    assert "first-value" not in (tmp_path / "logs" / "openbao.log").read_text()

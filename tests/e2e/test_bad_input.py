"""Bad input and dead runs on the lab (issue 10, items 6 and 8): a hostile `--value-stdin`
or a state dir that is a file changes nothing (exit 2, or 3 when a consumer's schema refuses
the value); TLS failures name the CA setting; a kill -9'd run reads as interrupted, its lock
names how to take over, its state stays private; a Lease left after `run.end` blocks nothing.

One lab for the module; tests run in file order and each leaves the chain healthy.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import stat
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.labtools import SHOP, Lab
from tests.support.polling import eventually

pytestmark = pytest.mark.lab

SYSTEM_CAS = Path("/etc/ssl/certs/ca-certificates.crt")  # real CAs; none signed the lab's


def unchanged(lab: Lab, before: tuple[int, str, list[str]]) -> None:
    v0, secret, runs = before
    assert lab.bao_version() == v0
    assert lab.secret_value("dragonfly", "dragonfly-password-secret", "password") == secret
    assert lab.run_ids() == runs


def snapshot(lab: Lab) -> tuple[int, str, list[str]]:
    return (lab.bao_version(),
            lab.secret_value("dragonfly", "dragonfly-password-secret", "password"),
            lab.run_ids())


def rotate_bytes(lab: Lab, *args: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    from tests.support.labtools import ROTATE

    return subprocess.run([ROTATE, *args], env=lab.process_env, input=stdin,
                          capture_output=True, timeout=120, cwd=lab.dir)


@pytest.mark.parametrize(("stdin", "code", "says"), [
    (b"caf\xe9-not-utf8-but-latin1-0123456789\n", 2, "not valid UTF-8"),
    (b"x" * (1 << 20) + b"\n", 2, "longer than 65536 bytes"),
    (b"with\x00nul-0123456789abcdef\n", 2, "control character (U+0000)"),
    # valid UTF-8 that the consumers' schemas refuse (cart: ^[A-Za-z0-9._~-]+$): preflight
    (b"p@ss:w/rd %?# with spaces 0123456789", 3, "document.valid cart"),
])
def test_hostile_value_stdin_changes_nothing(
    lab: Lab, stdin: bytes, code: int, says: str
) -> None:
    before = snapshot(lab)
    done = rotate_bytes(lab, "dragonfly", "--confirm", "--value-stdin", stdin=stdin)
    err = done.stderr.decode()
    assert done.returncode == code, err
    assert says in err
    assert "Traceback" not in err and "p@ss:w/rd" not in err + done.stdout.decode()
    unchanged(lab, before)


def test_a_state_dir_that_is_a_file_exits_2_and_changes_nothing(lab: Lab) -> None:
    before = snapshot(lab)
    not_a_dir = lab.dir / "state-is-a-file"
    not_a_dir.write_text("")
    res = lab.rotate("dragonfly", "--confirm", "--state-dir", str(not_a_dir))
    assert res.code == 2, res.output
    assert f"state directory {not_a_dir} is not a directory" in res.stderr
    unchanged(lab, before)


def unreachable(output: str) -> list[str]:
    """Failed checks that call a TLS failure "unreachable"."""
    return [line for line in output.splitlines() if "FAIL" in line and "unreachable" in line]


def test_tls_failures_name_the_ca_setting(lab: Lab) -> None:
    config = json.loads(Path(lab.env["KUBECONFIG"]).read_text())
    api_url = config["clusters"][0]["cluster"]["server"]
    config["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
        SYSTEM_CAS.read_bytes()).decode()
    wrong = lab.dir / "kubeconfig-wrong-ca"
    wrong.write_text(json.dumps(config))
    res = lab.rotate("dragonfly", "--kubeconfig", str(wrong))
    assert res.code == 3, res.output
    assert f"TLS verification failed for {api_url}" in res.output
    assert "certificate-authority" in res.output
    assert not unreachable(res.output)

    # OpenBao at an HTTPS address whose certificate our CA file did not sign.
    env = {"BAO_ADDR": api_url, "VAULT_ADDR": api_url, "BAO_CACERT": str(SYSTEM_CAS)}
    saved = dict(lab.env)
    lab.env.update(env)
    try:
        res = lab.rotate("dragonfly")
    finally:
        lab.env.clear()
        lab.env.update(saved)
    assert res.code == 3, res.output
    assert f"TLS verification failed for {api_url}" in res.output
    assert "BAO_CACERT" in res.output
    assert not unreachable(res.output)


def test_a_context_the_kubeconfig_lacks_is_named_with_the_ones_it_has(lab: Lab) -> None:
    """Options before the credential, ``-o yaml``, and a context the lab's kubeconfig does
    not have: exit 2 naming the contexts it has, one YAML error document, nothing changed.
    (The plan itself is not repeated here: every other lab test plans.)"""
    from ruamel.yaml import YAML

    before = snapshot(lab)
    kubeconfig = lab.env["KUBECONFIG"]
    contexts = [c["name"] for c in json.loads(Path(kubeconfig).read_text())["contexts"]]
    res = lab.rotate("--context", "nosuch", "-o", "yaml", "dragonfly")
    assert res.code == 2, res.output
    assert (f"cannot use the kubeconfig (context nosuch): context nosuch is not in "
            f"{kubeconfig} (its contexts: {', '.join(contexts)})") in res.stderr
    error = YAML(typ="safe", pure=True).load(res.stdout)
    assert (error["kind"], error["error"], error["exit_code"]) == ("error", "UsageError", 2)
    unchanged(lab, before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_kill_9_reads_interrupted_names_the_take_over_and_stays_private(lab: Lab) -> None:
    known = set(lab.run_ids())
    lab.fault("eso-stall")
    proc = lab.spawn_rotate("dragonfly", "--confirm")
    try:
        run_id = eventually(lambda: next(iter(set(lab.run_ids()) - known), None), 30,
                            "the run's journal")
        eventually(lambda: any(e.get("kind") == "sync.wait" and e["event"] == "step.start"
                               for e in lab.journal_events(run_id)) or None, 30,
                   "the run to reach sync.wait")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        lab.fault("eso-stall", None, clear=True)

    runs = lab.rotate("runs", "-o", "json")
    statuses = {r["run_id"]: r["status"] for r in json.loads(runs.stdout)["runs"]}
    assert statuses[run_id] == "interrupted"
    shown = lab.rotate("show", run_id)
    assert "interrupted" in shown.stdout and f"rotate resume {run_id} --confirm" in shown.output

    blocked = lab.rotate("dragonfly", "--confirm")  # the Lease is still fresh
    assert blocked.code == 4, blocked.output
    assert "is gone" in blocked.stderr
    assert f"rotate resume {run_id} --confirm" in blocked.stderr
    assert "--take-over-lock" in blocked.stderr

    state = Path(lab.env["ROTATE_STATE_DIR"])
    assert mode(state / "runs") == 0o700 and mode(state / "runs" / run_id) == 0o700
    assert mode(state / "runs" / run_id / "journal.jsonl") == 0o600

    res = lab.rotate("resume", run_id, "--confirm")
    assert res.code == 0, res.output
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}


def test_a_lease_left_after_run_end_blocks_nothing(lab: Lab) -> None:
    finished = lab.run_ids()[-1]
    assert lab.rotate("show", finished).code == 0
    gone = subprocess.Popen(["true"])
    gone.wait()
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lab.kubectl_apply({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "rotate-dragonfly", "namespace": "rotate-system",
                     "annotations": {"rotate.dev/host": socket.gethostname(),
                                     "rotate.dev/pid": str(gone.pid)}},
        "spec": {"holderIdentity": f"someone@{socket.gethostname()}/{finished}",
                 "leaseDurationSeconds": 30, "acquireTime": now, "renewTime": now}})
    v0 = lab.bao_version()
    res = lab.rotate("dragonfly", "--confirm")
    assert res.code == 0, res.output
    assert lab.bao_version() == v0 + 1

"""The fault matrix's cases around values rotate did not write (bench/faults.py runs them):

- ``adopt-noop``: ``rotate CRED --adopt --confirm`` when OpenBao holds exactly what the
  chain holds — exit 0, no run journaled, nothing changed;
- ``adopt``: a human's ``bao kv put`` of the path (another password, every other key kept),
  then ``rotate CRED --adopt --confirm`` killed at a kind; resume carries the hand value
  with no version of its own, rollback puts back the value from before the case;
- ``secret-edit``: the credential's target Secret changed by hand (``kubectl patch``) while
  a run is frozen at a kind; the run goes on (ESO puts a tampered Secret it owns back from
  OpenBao, as ESO's ``isSecretValid`` does) and must end consistent.

Seen from outside as every case: OpenBao's versions and value, the Secret, Dragonfly's AUTH,
the documents and readyz (the checks of bench/faults.py).  Values are compared, never shown.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess

from bench.fault_world import Credential, World
from bench.world import BenchError

#: what a human's `bao kv put` writes before an adopt case, then a fresh suffix: each case
#: must write a value the chain does not hold yet (else there is nothing to adopt)
ADOPTED = "adopted-by-hand-"
#: what a human writes into the target Secret while a run is in flight
SECRET_BY_HAND = "secret-edited-by-hand-while-rotate-ran-0"


def chain_written(world: World, cred: Credential) -> None:
    """Make sure rotate wrote the path last (``rotate-version``), as adopt needs to know the
    chain's value: a rotation first on a lab that was only seeded."""
    meta = world.bao(f"secret/metadata/{cred.bao_path}").get("custom_metadata") or {}
    if "rotate-version" not in meta or int(meta["rotate-version"]) != world.bao_version(cred):
        done = world.rotate(cred.name, "--confirm")
        if done.returncode != 0:
            raise BenchError(f"rotate {cred.name} --confirm before the case exited "
                             f"{done.returncode}")


def put_by_hand(world: World, cred: Credential) -> None:
    """A human's ``bao kv put`` of another password, the path's other keys kept."""
    data = world.bao_data(cred, world.bao_version(cred))
    world.bao_put(cred, {**data, cred.bao_key: ADOPTED + secrets.token_hex(12)})


def adopt_noop(world: World, cred: Credential, known: set[str]) -> tuple[int, list[str]]:
    """``--adopt --confirm`` with nothing to adopt: its exit code and what went wrong."""
    v0 = world.bao_version(cred)
    done = world.rotate(cred.name, "--adopt", "--confirm")
    problems = []
    if done.returncode != 0:
        problems.append(f"--adopt with nothing to adopt exited {done.returncode}, not 0")
    if "Nothing to adopt" not in done.stdout:
        problems.append("--adopt with nothing to adopt did not say so")
    if world.bao_version(cred) != v0:
        problems.append("--adopt with nothing to adopt wrote OpenBao")
    if world.known_runs() - known:
        problems.append("--adopt with nothing to adopt journaled a run")
    return done.returncode, problems


def edit_secret(world: World, cred: Credential) -> None:
    """``kubectl patch`` of the target Secret's key with another value, as a human would."""
    ns, name, key = cred.secret
    patch = {"data": {key: base64.b64encode(SECRET_BY_HAND.encode()).decode()}}
    done = subprocess.run(["kubectl", "patch", "secret", name, "-n", ns, "--type", "merge",
                           "-p", json.dumps(patch)], env=world.env, capture_output=True,
                          text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise BenchError(f"kubectl patch secret {ns}/{name}: exit {done.returncode}")

"""``rotate rbac`` and ``rotate vault-policy``: golden output for the example chain, derived
from the same list doctor checks, cheap to start.

The fake engine loads the real example chain (these commands only read the chain file);
rewrite the golden files with ROTATE_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.engine import FakeEngine, FakeOptions
from tests.support.cli import check_golden, invoke
from tests.support.paths import EXAMPLE_CHAIN
from tests.support.startup import HEAVY, modules_after

EXAMPLE = EXAMPLE_CHAIN


class ChainEngine(FakeEngine):
    """The fake facade, with the real chain loader (what rbac and vault-policy call)."""

    def load_chain(self, options: FakeOptions) -> Any:
        from rotate.chain.loader import load_chain

        return load_chain(options.chain_file)


def run(*args: str) -> Any:
    return invoke([*args, "--chain", str(EXAMPLE)], ChainEngine())


def test_rbac_yaml_for_every_credential() -> None:
    result = run("rbac")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    check_golden("rbac.yaml", result.stdout)


def test_rbac_json_is_one_list_with_the_service_account_first() -> None:
    result = run("rbac", "dragonfly", "-o", "json", "--service-account", "ops/rotator")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "List"
    kinds = [(o["kind"], o["metadata"].get("namespace")) for o in doc["items"]]
    assert kinds[0] == ("ServiceAccount", "ops")
    assert ("ClusterRole", None) in kinds and ("Role", "shop") in kinds
    assert all(s == [{"kind": "ServiceAccount", "name": "rotator", "namespace": "ops"}]
               for s in (o.get("subjects") for o in doc["items"]) if s is not None)
    # dragonfly alone: no dragonfly-acl objects
    assert "dragonfly-acl" not in result.stdout and "search" not in result.stdout


def test_rbac_grants_exactly_the_permissions_doctor_checks() -> None:
    from rotate.chain.loader import load_chain
    from rotate.clients.kube_kinds import kind_info
    from rotate.engine.access import permissions_needed

    chain = load_chain(EXAMPLE)
    doc = json.loads(run("rbac", "-o", "json").stdout)
    granted = set()
    for obj in doc["items"]:
        ns = obj["metadata"].get("namespace") if obj["kind"] == "Role" else None
        for rule in obj.get("rules") or []:
            for verb in rule["verbs"]:
                for name in rule.get("resourceNames") or [None]:
                    granted.add((verb, rule["apiGroups"][0], rule["resources"][0], ns, name))
    needed = set()
    for cred in chain.credentials.values():
        for p in permissions_needed(chain, cred):
            info = kind_info(p.kind)
            res = info.plural + (f"/{p.subresource}" if p.subresource else "")
            needed.add((p.verb, info.group, res, p.namespace, p.name))
    assert granted == needed
    assert not any(verb == "create" and name for verb, _, _, _, name in granted)


def test_vault_policy_hcl() -> None:
    result = run("vault-policy")
    assert result.exit_code == 0, result.output
    assert 'path "secret/data/infra/dragonfly" {' in result.stdout
    check_golden("vault_policy.hcl", result.stdout)


def test_vault_policy_for_one_credential() -> None:
    result = run("vault-policy", "dragonfly")
    assert result.exit_code == 0
    assert "dragonfly-acl" not in result.stdout
    assert 'path "sys/capabilities-self" {' in result.stdout


@pytest.mark.parametrize("args", [["rbac", "nope"], ["vault-policy", "nope"],
                                  ["rbac", "--service-account", "no-slash"],
                                  ["rbac", "--service-account", "Bad/NAME"],
                                  ["rbac", "-o", "xml"]])
def test_bad_input_is_a_usage_error(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args", [["rbac", "--help"], ["vault-policy", "--help"]])
def test_help_imports_nothing_heavy(args: list[str], tmp_path: Path) -> None:
    code, modules = modules_after(*args, cwd=tmp_path)
    assert code == 0
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))

"""``rotate init`` on the lab: the chain file it drafts from the live cluster and Config
Center plans a dragonfly rotation whose preflight passes, holds no Secret value, and is not
overwritten without ``--force``."""

from __future__ import annotations

import pytest

from tests.support.labtools import Lab

pytestmark = pytest.mark.lab


def test_the_drafted_chain_plans_dragonfly_with_preflight_passing(lab: Lab) -> None:
    target = lab.dir / "drafted" / "rotate.yaml"
    target.parent.mkdir()
    result = lab.rotate("init", "--chain", str(target))
    assert result.code == 0, result.output
    assert f"wrote {target}" in result.stderr
    text = target.read_text()
    assert "# guess:" in text
    for ns, secret, key in (("dragonfly", "dragonfly-password-secret", "password"),
                            ("dragonfly", "dragonfly-acl-secret", "password"),
                            ("db", "postgres-password-secret", "password")):
        value = lab.secret_value(ns, secret, key)
        assert value and value not in text and value not in result.output
    assert (target.parent / "schemas" / "cart.schema.json").is_file()

    plan = lab.rotate("dragonfly", "--chain", str(target))
    assert plan.code == 0, plan.output
    assert "Preflight passed. Nothing was changed." in plan.stdout
    assert "provider.apply    deployment/dragonfly/dragonfly" in plan.stdout  # redis-acl
    for consumer in ("cart", "order", "user"):
        assert f"config.write      shop/{consumer} bootstrap" in plan.stdout

    again = lab.rotate("init", "--chain", str(target))
    assert again.code == 2 and "refusing to overwrite" in again.stderr
    assert target.read_text() == text
    assert lab.rotate("init", "--chain", str(target), "--force").code == 0

    printed = lab.rotate("init", "--chain", "-")
    assert printed.code == 0, printed.output
    assert printed.stdout.startswith("# Drafted by `rotate init`")
    assert "dragonfly:" in printed.stdout and "schemas not written" in printed.stderr

"""``rotate lab up --services N``: the generated shop is consistent (chain file, schemas,
manifests), without starting a lab."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
from rotate_lab.cluster.process import manifest_docs
from rotate_lab.control.launch import bootstrap_document
from rotate_lab.shop import files as shopfiles
from rotate_lab.shop import scaled as scaled_shop

from rotate.chain.loader import load_chain
from rotate.core.errors import UsageError
from tests.support.paths import SHOP_DATA


@pytest.mark.parametrize("count", [2, 101, 0])
def test_out_of_range_is_a_usage_error(count: int) -> None:
    with pytest.raises(UsageError, match="out of range: 3 to 100"):
        scaled_shop.check_count(count)


def test_generated_shop_is_consistent(tmp_path: Path) -> None:
    names = scaled_shop.generate(tmp_path, SHOP_DATA, 12)
    assert names == [f"consumer-{i:03d}" for i in range(4, 13)]
    assert shopfiles.shop_dir(tmp_path) == tmp_path / "shop"
    chain = load_chain(shopfiles.chain_file(tmp_path))
    consumers = [n for n, s in chain.services.items() if "dragonfly" in str(s.values)]
    assert {"cart", "order", "user", *names} <= set(consumers)
    assert len({"cart", "order", "user", *names}) == 12
    docs = manifest_docs(shopfiles.shop_dir(tmp_path))
    deployments = {d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"}
    assert set(names) <= deployments
    for name in (names[0], names[-1]):
        schema = shopfiles.service_schema(name, tmp_path)
        jsonschema.validate(bootstrap_document(name, schema, "p" * 40), schema)
        with pytest.raises(jsonschema.ValidationError):  # the name is the service's own
            jsonschema.validate(bootstrap_document("cart", schema, "p" * 40), schema)
    # without --services the generated shop goes: one lab directory, one shape
    assert scaled_shop.generate(tmp_path, SHOP_DATA, None) == []
    assert shopfiles.shop_dir(tmp_path) != tmp_path / "shop"

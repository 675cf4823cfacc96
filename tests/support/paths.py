"""Where the tests find the product and the lab's shop files: through importlib.resources
(what an installed package offers), never by counting parent directories of a test file.
The repository root itself, where a test needs it, is the ``repo_root`` fixture."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

#: the ``rotate`` package directory (the product's source files)
ROTATE_PACKAGE = Path(str(resources.files("rotate")))
#: the lab's ``ecommerce/`` tree: manifests, the example chain file, the shop's schemas
SHOP_DATA = Path(str(resources.files("rotate_lab.shop") / "ecommerce"))
EXAMPLE_CHAIN = SHOP_DATA / "rotate.yaml"


def shop_schema(service: str) -> dict[str, Any]:
    """One shop service's JSON Schema, as the lab seeds it."""
    data: dict[str, Any] = json.loads((SHOP_DATA / "schemas" / f"{service}.schema.json")
                                      .read_text(encoding="utf-8"))
    return data

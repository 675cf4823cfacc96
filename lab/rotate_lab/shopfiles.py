"""The shop's files, shipped as package data of ``rotate_lab``: the example manifests, the
chain file (``ecommerce/rotate.yaml``, also the example users read) and the shop services'
JSON Schemas (``ecommerce/schemas/<service>.schema.json``).

Read through :mod:`importlib.resources`, so a wheel install works like a checkout.
Invariant: :func:`shop_dir` returns a real directory.  Processes outside this one (``rotate``
itself, through ``ROTATE_CHAIN``) read the chain file by path, and the chain file names its
schemas relative to itself; so when the package data is not a directory on disk (a zip
import), the whole ``ecommerce/`` tree is copied into the lab directory once.
"""

from __future__ import annotations

import json
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

SHOP_DATA = "ecommerce"
CHAIN_FILE_NAME = "rotate.yaml"


def _packaged() -> Traversable:
    return resources.files("rotate_lab") / SHOP_DATA


def _copy_tree(src: Traversable, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if item.is_dir():
            _copy_tree(item, dst / item.name)
        else:
            (dst / item.name).write_bytes(item.read_bytes())


def shop_dir(lab_dir: Path) -> Path:
    """``ecommerce/`` as a real directory: the package's own, or a copy in ``lab_dir``."""
    packaged = _packaged()
    if isinstance(packaged, Path) and packaged.is_dir():
        return packaged
    target = lab_dir / SHOP_DATA
    if not (target / CHAIN_FILE_NAME).is_file():
        _copy_tree(packaged, target)
    return target


def chain_file(lab_dir: Path) -> Path:
    """The lab's chain file (what ``ROTATE_CHAIN`` points at in ``DIR/env``)."""
    return shop_dir(lab_dir) / CHAIN_FILE_NAME


def service_schema(service: str) -> dict[str, Any]:
    """The JSON Schema of one shop service's Config Center document."""
    text = (_packaged() / "schemas" / f"{service}.schema.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data

"""The validated-chain cache (rotate/chain/cache.py): a hit returns what the entry holds
without parsing or validating; anything that changes the bytes, the place or the rules, and
any entry that is corrupt or not this user's, means a full validation — with the same
problems as without a cache."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from rotate.chain import cache
from rotate.chain.cache import default_cache_dir, entry_key, load_chain_cached
from rotate.chain.loader import load_chain
from rotate.core.errors import ChainFileError
from tests.support.chains import MINIMAL, write_chain
from tests.support.paths import EXAMPLE_CHAIN


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "rotate" / "chains"


@pytest.fixture
def chain_file(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return write_chain(work, MINIMAL)


def _entry(cache_dir: Path, path: Path) -> Path:
    return cache_dir / f"{entry_key(path.read_bytes(), path.resolve())}.json"


def _rewrite(entry: Path, edit: object) -> None:
    """Rewrite an entry's data with ``edit`` applied, keeping it self-consistent (digest)."""
    doc = json.loads(entry.read_text())
    edit(doc["data"])  # type: ignore[operator]
    doc["data_sha256"] = cache._data_digest(doc["data"])
    entry.write_text(json.dumps(doc))


def _problems(path: Path, cache_dir: Path | None) -> list[str]:
    with pytest.raises(ChainFileError) as info:
        load_chain_cached(path, cache_dir)
    return [str(p) for p in info.value.problems]


def test_first_load_validates_and_stores_a_private_entry(chain_file: Path,
                                                         cache_dir: Path) -> None:
    chain = load_chain_cached(chain_file, cache_dir)
    assert chain == load_chain(chain_file)
    entry = _entry(cache_dir, chain_file)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    assert [p.name for p in cache_dir.iterdir()] == [entry.name]  # no temporary file left


def test_a_hit_builds_from_the_entry_without_parsing_the_file(chain_file: Path,
                                                              cache_dir: Path) -> None:
    load_chain_cached(chain_file, cache_dir)
    # What the entry says wins on a hit: proof that the file was neither parsed nor validated.
    _rewrite(_entry(cache_dir, chain_file),
             lambda data: data["credentials"]["dragonfly"].update(description="from cache"))
    assert load_chain_cached(chain_file, cache_dir).credentials["dragonfly"].description \
        == "from cache"


def test_the_example_chain_is_the_same_from_the_cache(tmp_path: Path, cache_dir: Path) -> None:
    work = tmp_path / "shop"
    shutil.copytree(EXAMPLE_CHAIN.parent, work)
    path = work / EXAMPLE_CHAIN.name
    cold = load_chain_cached(path, cache_dir)
    assert _entry(cache_dir, path).is_file()
    assert load_chain_cached(path, cache_dir) == cold == load_chain(path)


def test_an_edited_file_is_validated_again(chain_file: Path, cache_dir: Path) -> None:
    load_chain_cached(chain_file, cache_dir)
    chain_file.write_text(chain_file.read_text().replace(
        "generate: {length: 40", "description: edited\n    generate: {length: 40"))
    assert load_chain_cached(chain_file, cache_dir).credentials["dragonfly"].description \
        == "edited"
    chain_file.write_text(chain_file.read_text().replace("kvMount: secret", "kvMount: 7"))
    assert _problems(chain_file, cache_dir) == _problems(chain_file, None)
    assert any("/backend/kvMount" in p for p in _problems(chain_file, cache_dir))


def test_an_invalid_file_is_reported_as_without_a_cache_and_never_stored(
    chain_file: Path, cache_dir: Path,
) -> None:
    chain_file.write_text(MINIMAL.replace("lockNamespace: rotate-system", "lockNamespace: X_"))
    with pytest.raises(ChainFileError) as info:
        load_chain(chain_file)
    uncached = [str(p) for p in info.value.problems]
    assert any("/cluster/lockNamespace" in p for p in uncached)
    assert _problems(chain_file, cache_dir) == uncached
    assert _problems(chain_file, cache_dir) == uncached  # the second time too
    assert not cache_dir.exists() or list(cache_dir.iterdir()) == []


def test_unreadable_file_is_the_loaders_error(tmp_path: Path, cache_dir: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert _problems(missing, cache_dir) == _problems(missing, None)


def test_a_schema_file_gone_since_the_entry_is_reported(chain_file: Path,
                                                        cache_dir: Path) -> None:
    load_chain_cached(chain_file, cache_dir)
    (chain_file.parent / "cart.schema.json").unlink()
    problems = _problems(chain_file, cache_dir)
    assert problems == _problems(chain_file, None)
    assert any("schema file not found" in p for p in problems)


def test_the_same_bytes_elsewhere_are_another_entry(chain_file: Path, tmp_path: Path,
                                                    cache_dir: Path) -> None:
    load_chain_cached(chain_file, cache_dir)
    other = tmp_path / "elsewhere"
    other.mkdir()
    moved = write_chain(other, MINIMAL)
    chain = load_chain_cached(moved, cache_dir)
    assert chain.file == moved.resolve()
    assert chain.services["cart"].schema == (other / "cart.schema.json").resolve()
    assert len(list(cache_dir.iterdir())) == 2


def test_another_rotate_version_does_not_use_the_entry(chain_file: Path, cache_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    load_chain_cached(chain_file, cache_dir)
    _rewrite(_entry(cache_dir, chain_file),
             lambda data: data["credentials"]["dragonfly"].update(description="stale"))
    monkeypatch.setattr(cache, "__version__", "999.0")
    assert load_chain_cached(chain_file, cache_dir).credentials["dragonfly"].description == ""


@pytest.mark.parametrize("damage", ["truncated", "garbage", "bad digest", "other key",
                                    "unbuildable", "group-writable", "symlink"])
def test_a_corrupt_or_foreign_entry_is_ignored_and_replaced(
    damage: str, chain_file: Path, cache_dir: Path, tmp_path: Path,
) -> None:
    expected = load_chain_cached(chain_file, cache_dir)
    entry = _entry(cache_dir, chain_file)
    text = entry.read_text()
    doc = json.loads(text)
    if damage == "truncated":
        entry.write_text(text[: len(text) // 2])
    elif damage == "garbage":
        entry.write_bytes(b"\xff\x00not json")
    elif damage == "bad digest":
        doc["data"]["credentials"]["dragonfly"]["description"] = "tampered"
        entry.write_text(json.dumps(doc))
    elif damage == "other key":
        doc["key"] = "0" * 64
        entry.write_text(json.dumps(doc))
    elif damage == "unbuildable":
        _rewrite(entry, lambda data: data.pop("backend"))
    elif damage == "group-writable":
        _rewrite(entry, lambda data: data["credentials"]["dragonfly"].update(description="x"))
        entry.chmod(0o620)
    else:
        forged = tmp_path / "forged.json"
        shutil.copy(entry, forged)
        _rewrite(forged, lambda data: data["credentials"]["dragonfly"].update(description="x"))
        entry.unlink()
        entry.symlink_to(forged)
    assert load_chain_cached(chain_file, cache_dir) == expected
    assert json.loads(entry.read_text()) == json.loads(text)  # validated again, stored again
    assert not entry.is_symlink()
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600


def test_a_cache_directory_others_may_write_is_not_used(chain_file: Path,
                                                        cache_dir: Path) -> None:
    load_chain_cached(chain_file, cache_dir)
    _rewrite(_entry(cache_dir, chain_file),
             lambda data: data["credentials"]["dragonfly"].update(description="x"))
    cache_dir.chmod(0o777)
    assert load_chain_cached(chain_file, cache_dir).credentials["dragonfly"].description == ""


def test_an_unwritable_cache_costs_only_speed(chain_file: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    assert load_chain_cached(chain_file, blocker / "chains") == load_chain(chain_file)


def test_old_entries_are_pruned(tmp_path: Path, cache_dir: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "MAX_ENTRIES", 2)
    paths = []
    for i in range(3):
        (tmp_path / f"d{i}").mkdir()
        paths.append(write_chain(tmp_path / f"d{i}", MINIMAL))
        load_chain_cached(paths[-1], cache_dir)
        entry = _entry(cache_dir, paths[-1])
        os.utime(entry, ns=(i * 10**9, i * 10**9))  # mtime order = load order
    assert sorted(p.name for p in cache_dir.iterdir()) == sorted(
        _entry(cache_dir, p).name for p in paths[1:])


def test_where_the_cache_lives() -> None:
    assert default_cache_dir({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/x/rotate/chains")
    assert default_cache_dir({"XDG_CACHE_HOME": "rel", "HOME": "/h"}) == Path(
        "/h/.cache/rotate/chains")
    assert default_cache_dir({"HOME": "/h"}) == Path("/h/.cache/rotate/chains")
    assert default_cache_dir({}) is None


def test_without_a_cache_directory_nothing_is_written(chain_file: Path) -> None:
    before = sorted(p.name for p in chain_file.parent.iterdir())
    assert load_chain_cached(chain_file, None) == load_chain(chain_file)
    assert sorted(p.name for p in chain_file.parent.iterdir()) == before

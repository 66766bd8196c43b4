"""Segments of a sharded project (docs/sharding.md): listed over every shard as "SHARD:NUMBER",
exported from the shard that holds them, imported back onto that shard once, and a foreign
file's items each put on its own shard. Names are URL-shaped (slashes, ?, %, #, spaces)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from support.census import places
from tracker_core.admin import census_verbs, item_verbs, project_verbs, segment_verbs
from tracker_core.admin.errors import BadInput, NotFound
from tracker_core.maintainer import maintenance
from tracker_core.offload import segment_file, segment_registry
from tracker_core.project.shard_layout import ShardLayout

P = "shardsegs"
URLS = [f"https://example.org/seg ment/{i}?q=%20x&n={i}#frag {i}" for i in range(600)]
OFFLOAD = {"offload_high": "120", "offload_low": "60", "offload_segment_items": "40"}


@pytest.fixture
def layout(admin, tmp_path) -> ShardLayout:
    """A 3-shard project whose every shard offloaded segments into its own folder."""
    project_verbs.create(admin, P, OFFLOAD, shards=3)
    item_verbs.add(admin, P, URLS)
    maintenance.maintain_once(admin.conn, "test", tmp_path)
    return admin.layout(P)


def everywhere(r, layout: ShardLayout, directory) -> Counter:
    """How many places hold each name over every shard: queues and sets, and segment files."""
    found: Counter = Counter()
    for index, k in enumerate(layout.keys):
        found.update(places(r, k))
        found.update(r.smembers(k.offloading))
        folder = segment_file.shard_directory(directory, P, index)
        for number in segment_registry.registry(r, k):
            found.update(segment_file.read_segment(segment_file.segment_path(folder, P, number)))
    return found


def test_the_listing_names_every_shard_s_segments(admin, layout, r, tmp_path):
    listing = segment_verbs.list_segments(admin, P)
    names = list(listing["segments"])
    assert {name.split(":")[0] for name in names} == {"0", "1", "2"}
    offloaded = sum(row["items"] for row in listing["segments"].values())
    assert offloaded == census_verbs.status(admin, P)["offloaded"] > 0
    assert everywhere(r, layout, tmp_path) == Counter(URLS)


def test_export_and_import_come_back_to_the_shard_the_segment_left(admin, layout, r, tmp_path):
    ref = next(name for name in segment_verbs.list_segments(admin, P)["segments"] if name.startswith("2:"))
    out = tmp_path / "out.zst"
    exported = segment_verbs.export_file(admin, P, tmp_path, ref, out)
    items = segment_file.read_segment(out)
    assert exported["items"] == len(items) > 0 and {layout.shard_of(n) for n in items} == {2}
    assert not set(items) & set(everywhere(r, layout, tmp_path))  # they left the project
    back = segment_verbs.import_file(admin, P, tmp_path, out)
    assert back["segment"].startswith("2:") and back["items"] == len(items)
    number = int(back["segment"].split(":")[1])
    assert segment_file.segment_path(tmp_path / f"{P}.2", P, number).exists()
    assert segment_verbs.import_file(admin, P, tmp_path, out) == {
        "segment": None,
        "items": 0,
        "duplicates": len(items),
    }
    assert everywhere(r, layout, tmp_path) == Counter(URLS)
    # The shard refills it like any other segment of its own.
    project_verbs.set_settings(admin, P, {"offload_high": "0"})
    maintenance.maintain_once(admin.conn, "test", tmp_path)
    assert set(items) <= r.smembers(layout.keys[2].todo)
    assert everywhere(r, layout, tmp_path) == Counter(URLS)


def test_a_foreign_file_s_items_go_each_to_its_own_shard(admin, layout, r, tmp_path):
    fresh = [f"https://example.net/new one/{i}?a=%2F#x" for i in range(90)]
    foreign = tmp_path / "foreign.zst"
    segment_file.write_segment(foreign, fresh + URLS[:30])
    result = segment_verbs.import_file(admin, P, tmp_path, foreign, "secondary")
    assert result == {"segment": None, "items": 90, "duplicates": 30}
    for index, k in enumerate(layout.keys):
        assert r.smembers(k.secondary) == {n for n in fresh if layout.shard_of(n) == index}
    assert everywhere(r, layout, tmp_path) == Counter(URLS + fresh)


def test_segment_names_are_checked_before_anything_moves(admin, layout, r, tmp_path):
    one = next(iter(segment_verbs.list_segments(admin, P)["segments"]))
    before = everywhere(r, layout, tmp_path)
    for ref, error, reason in [
        (one.split(":")[1], BadInput, "name a segment SHARD:NUMBER"),  # a bare number
        (int(one.split(":")[1]), BadInput, "name a segment SHARD:NUMBER"),
        ("3:1", BadInput, "SHARD below 3"),  # just past the last shard
        ("2:0", BadInput, "SHARD:NUMBER"),
        ("1:x", BadInput, "SHARD:NUMBER"),
        ("2:99999", NotFound, "no segment 2:99999"),
    ]:
        with pytest.raises(error, match=reason):
            segment_verbs.export_file(admin, P, tmp_path, ref, tmp_path / "never.zst")
    assert not (tmp_path / "never.zst").exists()
    assert everywhere(r, layout, tmp_path) == before


def test_the_cli_exports_and_imports_a_sharded_segment(admin, layout, cli, r, tmp_path):
    ref = sorted(segment_verbs.list_segments(admin, P)["segments"])[-1]
    out = tmp_path / "cli.zst"
    exported = cli("segments", "export", P, ref, str(out), "--segments-dir", str(tmp_path), "--json")
    assert exported.exit_code == 0, exported.output
    assert json.loads(exported.output)["segment"] == ref
    imported = cli("segments", "import", P, str(out), "--segments-dir", str(tmp_path))
    assert imported.exit_code == 0 and f"as segment {ref.split(':')[0]}:" in imported.output
    refused = cli("segments", "export", P, "7", str(out), "--segments-dir", str(tmp_path))
    assert refused.exit_code != 0 and "SHARD:NUMBER" in refused.output
    assert everywhere(r, layout, tmp_path) == Counter(URLS)

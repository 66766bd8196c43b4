"""Where every item of a project is, read straight from Redis (tests' own view, not the engine's).

The invariant the tests check: every item is in exactly one place (a shared queue, a
downloader's own queue, held by a limit or on its way there, out, done or dead).
"""

from __future__ import annotations

from collections import Counter

from tracker_core.keyspace import ProjectKeys
from tracker_core.offload import segment_file, segment_registry


def places(r, k: ProjectKeys) -> Counter:
    """How many places hold each name (redis-py client R with decoded responses)."""
    found = Counter()
    for queue in k.shared_queues():
        found.update(r.sscan_iter(queue, count=10_000))
    for owner in r.smembers(k.downloader_queues):
        found.update(r.sscan_iter(k.downloader_queue(owner), count=10_000))
    found.update(m.split("\0", 1)[1] for m in r.zrange(k.limited, 0, -1))
    found.update(m.split("\0", 1)[1] for m in r.smembers(k.limited_in))
    found.update(r.zrange(k.out, 0, -1))
    found.update(r.sscan_iter(k.done, count=10_000))
    found.update(r.hkeys(k.dead))
    return found


def assert_each_once(r, k: ProjectKeys, names) -> None:
    """Every one of NAMES is in exactly one place, and nothing else is anywhere."""
    found = places(r, k)
    missing = [n for n in names if found[n] != 1]
    assert not missing, f"{len(missing)} items not in exactly one place, e.g. {missing[:3]}"
    assert set(found) == set(names), f"{len(set(found) - set(names))} unexpected items"


def places_with_segments(r, k: ProjectKeys, segments) -> Counter:
    """places(), plus the set on its way to a segment and the items of every registered segment
    file (of a queue or of done) of a one-shard project whose files are under SEGMENTS."""
    found = places(r, k)
    found.update(r.smembers(k.offloading))
    for number in segment_registry.registry(r, k):
        found.update(segment_file.read_segment(segment_file.segment_path(segments, k.project, number)))
    return found

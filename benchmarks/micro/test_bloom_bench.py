"""Bloom hashing for one 400-item backfeed batch: the compiled module against its pure twin.

Run through the harness (the hot_paths case); figures in benchmarks/results/hot_paths.json and .md.
"""

from __future__ import annotations

import pytest

from tracker_core.items import bloom
from tracker_core.keyspace import ProjectKeys

TWIN = "bloom"  # conftest.py's implementation fixture: _bloom_c and _bloom_py
BATCH = [b"https://example.com/some/path/%d?page=%d" % (n, n % 7) for n in range(400)]
ONE_LAYER = bloom.Plan(ProjectKeys("bench"), bloom.Geometry()).hash_plan
THREE_LAYERS = bloom.Plan(ProjectKeys("bench"), bloom.Geometry(layers=3)).hash_plan
FINGERPRINTS = bloom.Plan(ProjectKeys("bench"), bloom.Geometry(kind=bloom.FINGERPRINT)).hash_plan


@pytest.mark.parametrize("plan", [ONE_LAYER, THREE_LAYERS], ids=["1 layer", "3 layers"])
def test_bloom_script_args_400_items(benchmark, implementation, plan):
    args = benchmark(implementation.script_args, BATCH, BATCH, plan)
    per_item = 1 + sum(1 + k for _, k, _, _, _ in plan)
    assert len(args) == 400 * per_item and args[0] == BATCH[0]


def test_bloom_fingerprint_args_400_items(benchmark, implementation):
    # A fingerprint filter's buckets lie in one block (bloom.Plan.blocked): block_args.
    args = benchmark(implementation.block_args, BATCH, BATCH, FINGERPRINTS)
    assert len(args) == 400 * 5 and args[0] == BATCH[0] and len(args[3]) == 3

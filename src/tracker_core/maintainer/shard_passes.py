"""The maintainer's pass over a sharded project (docs/sharding.md): every shard's steps, then
the shards' shares of the project's limits moved to where the items are.

- **Leases.** The first shard's lease gates the project: a maintainer that does not hold it
  does nothing. Each further shard's steps run under that shard's own lease (the same holder),
  because every lease-checking script (the log archive's, offloading's, refill's) reads the
  lease on its own shard, in the same atomic step: on a Cluster it cannot read another slot's.
- **Files.** Shard 0 keeps the project's folder, DIR/P; shard I (I > 0) has DIR/P.I, which
  holds the same layout as a one-shard project's folder (DIR/P.I/P/log/N.jsonl.zst ...): a dot
  is in no project name, so the folder is no other project's (shard_directory).
- **Offloading.** Each shard offloads and refills its own queues and done set, by its own copy
  of the watermarks (so each queue holds up to offload_high in Redis per shard), into its own
  folder; refill on demand keeps each shard's figures under its tag's inside (PROJECT.I...).
  A claim's ask names the project only: refill_shards serves every shard, counting each queue
  before reading a file, so the shards that did not ask cost a count each.
- **Statistics.** The upkeep runs once per project, on the first shard's pass, over every shard
  (tracker_core.figures.stats.upkeep).
- **Shares.** rebalance_shares: each shard with items waiting (queued, or claims due to be
  taken back) gets 1 / (shards with items); a shard with none gets DRY_SHARE of an even share.
"""

from __future__ import annotations

from tracker_core import keyspace, scripts
from tracker_core.figures import census
from tracker_core.infra import redis_clock
from tracker_core.maintainer.steps import STEPS, ProjectPass, Watermarks, run_steps
from tracker_core.offload.lease import Lease, LeaseLost
from tracker_core.offload.segment_file import shard_directory
from tracker_core.project.shard_layout import SHARE_FIELD, ShardLayout, summed

# An empty shard's share, as a part of an even one (1 / shards). Not 0: a claim script reads 0
# as "no share" (the whole rate), and an item added to a dry shard must still be served; it is
# served at once up to the shard's burst (at least one item) and claims_limit (at least one),
# then at DRY_SHARE of an even share until the next pass gives the shard its full share. Small
# enough that, with every dry shard refilled between two passes, the project runs at most 1%
# over its rate.
DRY_SHARE = 0.01
SHARE_TOLERANCE = 0.01  # a share moving by less than this part of itself is not written


def waiting(client, k: keyspace.ProjectKeys, now_ms: int) -> int:
    """Items waiting on the shard of keys K: every to-do queue (census.read), offloaded tails
    included, and the claims a claim may take back now (due by NOW_MS, with reclaims on: at a
    project's end its work is mostly those)."""
    queued = sum(census.read(census.redis_py_runner(client), k).values())
    ttl = client.hget(k.settings, "reclaim_ttl_s")
    try:
        reclaims_on = ttl is None or float(ttl) > 0  # absent: the claim script's default, on
    except ValueError:
        reclaims_on = True
    return queued + (client.zcount(k.out, "-inf", now_ms) if reclaims_on else 0)


def shares(counts: list[int]) -> list[float]:
    """Each shard's share of the project's limits for the items waiting on each (COUNTS)."""
    full = sum(1 for n in counts if n > 0)
    if full == 0:  # nothing anywhere: even shares, as at creation
        return [1 / len(counts)] * len(counts)
    dry = DRY_SHARE / len(counts)
    return [1 / full if n > 0 else dry for n in counts]


def rebalance_shares(client, layout: ShardLayout) -> dict[int, float]:
    """Write each shard's share (shares()) where it moved by more than SHARE_TOLERANCE; the
    shares written, by shard. One set_settings per change (it bumps that shard's settings age;
    the claim script reads shard_share from its shard's settings at every claim), the first
    shard last, as every project-wide setting is written. The write checks that the stored
    share is still the one read (another writer: left to the next pass)."""
    now_ms = redis_clock.now_ms(client)
    wanted = shares([waiting(client, k, now_ms) for k in layout.keys])
    written = {}
    for index in [*range(1, layout.count), 0]:
        k = layout.keys[index]
        stored = client.hget(k.settings, SHARE_FIELD)
        try:
            old = float(stored)
        except (TypeError, ValueError):
            old = 0.0
        if abs(wanted[index] - old) <= SHARE_TOLERANCE * max(old, wanted[index]):
            continue
        age = scripts.set_settings(
            client,
            k,
            channel=keyspace.SETTINGS_CHANNEL,
            values={SHARE_FIELD: repr(wanted[index])},
            expected={SHARE_FIELD: stored or ""},
        )
        if age >= 0:
            written[index] = wanted[index]
    return written


def merged_reports(reports: list[dict]) -> dict:
    """The shards' pass reports as one: counts added, unreadable segments named "I:N" past the
    first shard (numbers are per shard), the rest the first's."""
    if not reports:
        return {}
    unreadable = [
        n if index == 0 else f"{index}:{n}"
        for index, report in enumerate(reports)
        for n in report.get("unreadable_segments", ())
    ]
    merged = summed(reports)
    if unreadable:
        merged["unreadable_segments"] = unreadable
    return merged


def _shard_lease(maintainer, k: keyspace.ProjectKeys, index: int) -> Lease:
    """MAINTAINER's lease of shard INDEX (keys K) of a project, made on first use."""
    name = f"{k.project}.{index}"  # a dot is in no project name: no project's own lease
    if name not in maintainer.leases:
        maintainer.leases[name] = Lease(maintainer.client, k, maintainer.holder, maintainer.lease_ms)
    return maintainer.leases[name]


def refill_shards(maintainer, layout: ShardLayout) -> dict | None:
    """Maintainer.refill_now of a sharded project (its claims asked, on any shard): every
    shard's queues refilled to their targets under that shard's lease, the watch written again;
    the reports added up. None when another maintainer holds the first shard's lease."""
    project = layout.project
    reports = []
    for index, k in enumerate(layout.keys):
        lease = maintainer._lease(project) if index == 0 else _shard_lease(maintainer, k, index)
        try:
            lease.keep()
        except LeaseLost:
            if index == 0:
                return None
            continue
        watermarks = maintainer.shard_watermarks.get((project, index)) or Watermarks.read(
            maintainer.client, k
        )
        p = ProjectPass(
            maintainer.client,
            k,
            shard_directory(maintainer.directory, project, index),
            lease,
            watermarks,
            demand=maintainer.demand,
        )
        skip = set(maintainer.shard_unreadable.get((project, index), ()))
        # Which shard asked is not said (the ask names the project): each queue is counted
        # before a file is read, so a shard that did not ask costs a count, not a decompression.
        reports.append(maintainer.refill(project, p, skip, count_first=True))
    return merged_reports(reports)


def sharded_pass(maintainer, layout: ShardLayout, cleanup: bool, now: float) -> dict:
    """One pass of MAINTAINER (offload.maintenance.Maintainer, holding the first shard's lease
    and its watermarks read) over every shard of LAYOUT, then the shares rebalanced; the shards'
    reports added up, with "shard_shares" when shares moved."""
    project = layout.project
    reports = []
    for index, k in enumerate(layout.keys):
        if index == 0:
            lease, watermarks = maintainer._lease(project), maintainer.watermarks[project]
        else:
            lease = _shard_lease(maintainer, k, index)
            if not lease.take():
                reports.append({"lease": f"shard {index} held elsewhere"})
                continue
            watermarks = Watermarks.read(maintainer.client, k)
        maintainer.shard_watermarks[(project, index)] = watermarks
        p = ProjectPass(
            maintainer.client,
            k,
            shard_directory(maintainer.directory, project, index),
            lease,
            watermarks,
            cleanup=cleanup,
            classified_ages=maintainer.shard_ages.setdefault((project, index), {})
            if maintainer.reclassify
            else None,
            stats_at=maintainer.stats_at if maintainer.stats_upkeep and index == 0 else None,
            now=now,
            demand=maintainer.demand,
            layout=layout,
        )
        reports.append(run_steps(p, STEPS))
        maintainer.shard_unreadable[(project, index)] = reports[-1].get("unreadable_segments", [])
    report = merged_reports(reports)
    moved = rebalance_shares(maintainer.client, layout)
    if moved:
        report["shard_shares"] = moved
    return report

"""A project's figures: the census of where every item is, statistics, charts, top downloaders.

- census: every place an item can be, counted in one place;
- stats: IRSR, RTT, throughput, ETA, unique visitors and chart data (stats_ranges, stats_rtt,
  stats_top), kept bounded by stats_upkeep, and a sharded project's, summed over its shards
  (stats_shards).

May import: tracker_core.keyspace, tracker_core.scripts, tracker_core.project,
tracker_core.offload (the segment registry's counts), tracker_core.warriors.
"""

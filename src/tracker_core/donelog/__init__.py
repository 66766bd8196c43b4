"""The done log as the record of the archive: entries, their archive on disk, and its shards.

May import: tracker_core.keyspace, tracker_core.infra, tracker_core.scripts,
tracker_core.project, tracker_core.offload (segment folders and the lease).
"""

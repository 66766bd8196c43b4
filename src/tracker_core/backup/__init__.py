"""Backups while serving: a copy of Redis and the segment files from one moment, and its restore.

`tracker backup DIR` (taking.backup) stops no process: warriors go on claiming and finishing.
It sets the backup hold (keyspace.BACKUP_HOLD), which makes every maintainer give up its leases
at its next step, takes the offload lease of every project and shard (waiting up to a lease
period for passes under way), and while it holds them all: copies each Redis primary's data as
a replica would receive it (snapshot.stream_rdb: SYNC, one RDB per primary, no file access to
the Redis host needed), then the segment files. Nothing moves a segment without its lease, so
the files and the snapshot's segment registry agree: an item is in Redis or in a registered
file, never both, never neither. The snapshot is then loaded into a private redis-server, which
proves it loads, gives the census per project for the manifest and checks that every segment
the snapshot registers has its file in the copy. The directory is written as DIR.partial,
fsynced, and renamed: it is whole or absent.

`tracker restore DIR` (restoring.restore) checks the manifest and every checksum, refuses a
target Redis that holds keys or has clients (a deployment not stopped), loads each snapshot
into a private redis-server and replays every key into the target with DUMP and RESTORE (so it
works on any reachable Redis, a Cluster included, and the target's own AOF records it as it
comes), puts the segment files back and compares the census with the manifest's.

- hold: the backup hold and every lease, renewed in a thread until released;
- snapshot: the primaries of a URL and the replication copy of one;
- loading: private redis-servers on a snapshot, key replay, the census of a Redis;
- manifest: the manifest, checksums, the DIR.partial -> DIR rule;
- taking, restoring: the two commands' cores.

May import: tracker_core.keyspace, tracker_core.infra, tracker_core.offload, tracker_core.donelog,
tracker_core.project, tracker_core.admin.
"""

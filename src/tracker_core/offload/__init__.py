"""Offloading: move the excess of long queues (and of `done`) to zstandard segment files, and refill.

`tracker maintain` runs a `Maintainer` on every node. Per project, each of the shared queues
(todo, todo:backfeed, todo:secondary, todo:redo) whose size passes `offload_high` has its excess
written to segment files; a queue that falls below `offload_low` gets its own segments back,
oldest first. With `done_mode=offload`, `done` beyond `done_offload_high` goes to segment files
too; those stay on disk (they are done, not work: never refilled, counted in `tracker status`).
The done log's entries beyond log_maxlen are archived under the same lease, in SEGMENTS_DIR/P/log/
(tracker_core.donelog.log_archive: the same write-fsync-then-register rule).

The package, one concern per module (import each by its own name; this file holds no code):
- `segment_file`: the file format (NUL-separated names, zstandard), paths, the items' digest;
- `segment_registry`: the registry in Redis (which segments count, their sources, counts);
- `lease`: one maintainer at a time per project (`Lease`, `LeaseLost`);
- `staging`: offload_one, refill_one, recover and cleanup_files (the crash-safety below);
- `demand`: refill on demand (claims ask, the maintainer's refiller thread refills at once).
The passes that decide when to offload and refill live in tracker_core.maintainer, and the
export and import of segment files in tracker_core.admin.segment_transfer; both import this
package, which imports only the key names, the script bindings and the infrastructure.

A lease per project (`{P}:maintain_lease`, in the project's slot) lets one maintainer at a time
move a project's segments, and every script that stages, commits, aborts or refills checks the
holder in the same atomic step, so a maintainer whose lease ran out (a long pass, a pause) can
change nothing: its next step is refused, it stops that project's pass, and whatever file it
wrote stays unregistered (removed later). The lease is renewed between steps of a long pass.
The segment directory must be the same storage for every node that may hold a lease (a shared
mount, or run maintain on one node only).

Crash safety, item by item (every item is always in exactly one counted place):
- offload: items move queue -> `offloading` (one script, which also reserves the segment number
  and records it with the source in `segment_queues` '#staged'); the file is written to a temp
  name, fsynced, renamed, the directory fsynced; only then one script registers the segment and
  drops `offloading`. A crash before that leaves the items in `offloading` (counted as
  offloaded): the next holder puts them back into their queue, a bounded chunk per script, and
  deletes the unregistered file.
- refill: the file is read, one script puts its items into their queue and unregisters the
  segment; only then is the file deleted. A crash in between leaves an unregistered file. A
  queue is refilled by each pass while below its target (offload_low, or more while claims
  drain it fast), and between passes as soon as a claim asks (`demand`).
- Unregistered files (left by a crash, a lost lease, or a failed unlink) are deleted when a
  maintainer starts and every STALE_FILE_S after, once older than STALE_FILE_S (younger ones
  may be an import between writing its file and registering it). Files of deleted projects go
  too (`tracker project delete` leaves a tombstone in SEGMENTS_DELETED).
The registry (`segments` hash: number -> items) decides which files count.

Item status (`GET /P/items/NAME.json`, item_status.py) does not open segment files: an item on
its way to a segment is "offloaded", and a name found nowhere while the project has segment files
is answered with `maybe: ["offloaded"]`. Answering from disk would cost a scan of every segment;
the Bloom filter only knows "seen", not where.

May import: tracker_core.keyspace, tracker_core.infra, tracker_core.scripts.
"""

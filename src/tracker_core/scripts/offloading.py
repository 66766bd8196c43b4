"""The scripts of a project's maintainer: its lease (maintain_lease), offloading queues to
segment files and back (offload_stage, offload_commit, offload_abort, refill, refill_watch),
moving segments between trackers (segment_export, segment_import) and archiving the done log
(log_archive). All but the lease's own script check that the caller holds the lease."""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from tracker_core.scripts.binding import Binding, Derived, Many, ProjectKey, RawBinding, given, wire

LEASE = ProjectKey("maintain_lease", "the project's maintain lease")
NOT_HOLDER = -4  # every lease-checking script: the caller does not hold the lease, nothing changed


class MaintainLeaseCodes(IntEnum):
    HELD = 1
    NOT_HELD = 0  # another holder has it (or, releasing, the caller did not hold it)


# Take or renew (or with RELEASE give up) K's maintenance lease.
maintain_lease = RawBinding(
    "maintain_lease",
    keys=(ProjectKey("maintain_lease", "the lease"),),
    args={"holder": "holder id", "lease_ms": "lease length (ms)"},
    more_args=Many("'release' to give it up", lambda release: ("release",) if release else ()),
    defaults={"release": False},
    codes=MaintainLeaseCodes,
)


class OffloadStageCodes(IntEnum):
    EMPTY = 0  # the source is empty; a number > 0 is the segment reserved for the file
    PENDING = -2  # an earlier offload is unfinished: abort it first
    BAD_ARGUMENT = -3  # a bad count, or a '#next' that is not a number
    NOT_HOLDER = NOT_HOLDER


class StageReply(NamedTuple):
    code: int  # the segment number reserved (> 0), or OffloadStageCodes
    items: list


# Take up to COUNT items of SOURCE (its key SOURCE_KEY) into the offloading set.
offload_stage = Binding(
    "offload_stage",
    keys=(
        LEASE,
        given("source_key", "source: a todo queue, or done"),
        "offloading",
        "segments",
        "segment_queues",
    ),
    args={"holder": "lease holder", "count": "items to take", "source": "source name"},
    reply=lambda reply: StageReply(int(reply[0]), reply[1:]),
    shape=StageReply,
    codes=OffloadStageCodes,
)


class OffloadCommitCodes(IntEnum):
    COMMITTED = 1
    STAGED_CHANGED = 0  # the staged set is not the one the caller wrote to its file
    NOT_HOLDER = NOT_HOLDER


# Register segment NUMBER's file (COUNT items of SOURCE) and drop its staged items.
offload_commit = RawBinding(
    "offload_commit",
    keys=(LEASE, "offloading", "segments", "segment_queues", "stats"),
    args={
        "holder": "lease holder",
        "number": "segment number",
        "count": "items in the file",
        "source": "source name",
    },
    codes=OffloadCommitCodes,
)


class OffloadAbortCodes(IntEnum):
    NOT_HOLDER = NOT_HOLDER
    WRONG_SOURCE = -5  # the staged items came from another source than the caller named


class AbortReply(NamedTuple):
    moved: int  # or OffloadAbortCodes when < 0
    left: int


# Put up to MOST staged items back into SOURCE (its key SOURCE_KEY).
offload_abort = Binding(
    "offload_abort",
    keys=(
        LEASE,
        "offloading",
        "segment_queues",
        given("source_key", "the source the staged items came from"),
    ),
    args={"holder": "lease holder", "source": "source name", "most": "most items to move"},
    reply=lambda reply: AbortReply(*reply),
    shape=AbortReply,
    codes=OffloadAbortCodes,
)


class RefillCodes(IntEnum):
    NOT_REGISTERED = -1
    NOT_HOLDER = NOT_HOLDER
    WRONG_SOURCE = -5
    BAD_COUNT = -6  # the file holds another number of items than the segment registered
    ENOUGH = -7  # the queue already holds as many items as the caller refills it to


# Put segment NUMBER's ITEMS back into QUEUE (its key QUEUE_KEY) and unregister it, while the queue
# holds fewer than BELOW items if given: how many, or a code.
refill = RawBinding(
    "refill",
    keys=(LEASE, "segments", "segment_queues", given("queue_key", "the target queue"), "stats"),
    args={
        "holder": "lease holder",
        "number": "segment number",
        "queue": "target queue's name",
        "below": Derived("refill only while", lambda below: "" if below is None else below),
    },
    more_args=Many("the segment's items", lambda items: map(wire, items)),
    defaults={"below": None},
    codes=RefillCodes,
)


class RefillWatchCodes(IntEnum):
    SET = 1  # the field holds the value sent (or is cleared)
    UNKNOWN_PROJECT = -1
    BAD_VALUE = -3  # not BELOW x 16 + queue bits, as claim-21.lua reads it
    NOT_HOLDER = NOT_HOLDER


# Set K's REFILL_WATCH_FIELD to VALUE (BELOW x 16 + queue bits, offload.demand; '' clears it),
# the lease holder only.
refill_watch = RawBinding(
    "refill_watch",
    keys=(LEASE, "settings"),
    args={"holder": "lease holder", "value": "REFILL_WATCH_FIELD's new value"},
    codes=RefillWatchCodes,
)


class SegmentExportCodes(IntEnum):
    NOT_REGISTERED = -1


# Unregister segment NUMBER, leaving an import ticket for DIGEST: the items it held, or a code.
segment_export = RawBinding(
    "segment_export",
    keys=("segments", "segment_queues", "segment_exports", "stats"),
    args={"number": "segment number", "digest": "digest of the segment's items"},
    codes=SegmentExportCodes,
)


class SegmentImportCodes(IntEnum):
    IMPORTED = 1
    NUMBER_TAKEN = 0
    UNKNOWN_PROJECT = -1
    NO_TICKET = -2  # no export of these items waits to come back: add them through the filter


# Register an exported segment's file once as NUMBER.
segment_import = RawBinding(
    "segment_import",
    keys=("settings", "segments", "segment_queues", "segment_exports", "stats"),
    args={"number": "segment number", "count": "items in the file", "digest": "digest of the file's items"},
    codes=SegmentImportCodes,
)


class LogArchiveCodes(IntEnum):
    REGISTERED = 1
    NOT_CONTINUATION = 0  # the file does not continue the archive: nothing changed
    NOT_HOLDER = NOT_HOLDER


class LogArchiveReply(NamedTuple):
    code: int  # LogArchiveCodes
    trimmed: int


# Register log segment NUMBER (entries FIRST_ID..LAST_ID) and trim them.
log_archive = Binding(
    "log_archive",
    keys=(LEASE, "log", "log_segments", "stats"),
    args={
        "holder": "lease holder",
        "number": "segment number",
        "first_id": "first entry id in the file",
        "last_id": "last entry id in the file",
        "entries": "entries in the file",
    },
    reply=lambda reply: LogArchiveReply(*reply),
    shape=LogArchiveReply,
    codes=LogArchiveCodes,
)

"""The reply codes of every Lua script, by name: one class per script, named after it.

Each script's codes are its own namespace: ``-2`` is ``Release.STALE_AGE`` but
``BloomAdd.LAYERS_CHANGED`` and ``RegisterWarrior.REGISTRY_FULL``, so a caller compares against
the name of the script it ran and never against a bare number.

The numbers are kept as they were, not renumbered: claim's 200/403/404/429 are the HTTP statuses
the API answers with, and the others are written in each script's contract header and in the
scripts' own tests; keeping them lets every caller switch to the names one at a time. Nothing
outside this repository reads them.

Every class lists each number its script can return first (``return N``, ``return {N, ...}``,
``refuse(N, ...)`` in the Lua body), counts included where the body returns them as a literal
(``EMPTY = 0``): tests/lua/test_contract.py checks that against the Lua source. A script that
returns a count (or an age) besides these returns it as a plain number >= 0 (>= 1 for ages).
"""

from __future__ import annotations

from enum import IntEnum

OK = 200  # the code of a script that answers {200, ...} when it did its work
UNKNOWN_PROJECT = -1  # every script that checks the settings hash: the project does not exist


class BloomAdd(IntEnum):
    OK = 0
    UNKNOWN_PROJECT = -1
    LAYERS_CHANGED = -2  # the filter has another number of layers than planned: reload, retry
    WRONG_SECRET = -3
    FULL = -4  # the bound would be passed by this batch's new items: nothing set or queued
    SPLIT = -5  # {-5, cut, 0}: the batch would pass the last layer's capacity: send CUT items first


class BloomConfigure(IntEnum):
    UNKNOWN_PROJECT = -1
    NOT_EMPTY = -2  # the filter holds items: its geometry can no longer change
    NOT_A_NUMBER = -3


class BuryUnservable(IntEnum):
    OK = 200
    UNKNOWN_PROJECT = -1


class Claim(IntEnum):
    OK = 200  # items given (at least one)
    BLOCKED = 403
    NOTHING = 404  # queues empty, project paused, claims capped or limited
    RATE_LIMITED = 429
    UNKNOWN_PROJECT = -1


class ClearQueue(IntEnum):
    UNKNOWN_PROJECT = -1


class CreateProject(IntEnum):
    EXISTS = 0
    CREATED = 1


class PadHashes(IntEnum):
    UNKNOWN_PROJECT = -1
    PADDED = 1


class Done(IntEnum):
    OK = 200
    UNKNOWN_PROJECT = -1


class HoldLimited(IntEnum):
    NONE_WAITING = 0
    BAD_ARGUMENT = -1


class HoldQueued(IntEnum):
    NOT_PAIRS = -1


class ItemStatus(IntEnum):
    OK = 200
    UNKNOWN_PROJECT = -1


class LogArchive(IntEnum):
    REGISTERED = 1
    NOT_CONTINUATION = 0  # the file does not continue the archive: nothing changed
    NOT_HOLDER = -4


class MaintainLease(IntEnum):
    HELD = 1
    NOT_HELD = 0  # another holder has it (or, releasing, the caller did not hold it)


class MoveItems(IntEnum):
    UNKNOWN_PROJECT = -1
    NOT_PAIRS = -2


class OffloadAbort(IntEnum):
    NOT_HOLDER = -4
    WRONG_SOURCE = -5  # the staged items came from another source than the caller named


class OffloadCommit(IntEnum):
    COMMITTED = 1
    STAGED_CHANGED = 0  # the staged set is not the one the caller wrote to its file
    NOT_HOLDER = -4


class OffloadStage(IntEnum):
    EMPTY = 0  # the source is empty; a number > 0 is the segment reserved for the file
    PENDING = -2  # an earlier offload is unfinished: abort it first
    BAD_ARGUMENT = -3  # a bad count, or a '#next' that is not a number
    NOT_HOLDER = -4


class RedoItems(IntEnum):
    OK = 200
    UNKNOWN_PROJECT = -1
    STALE_AGE = -2  # classified at another settings age: reclassify and call again
    OWNERS_CHANGED = -3  # todo:d is not the downloaders given: read it again
    NOT_TRIPLES = -4


class Refill(IntEnum):
    NOT_REGISTERED = -1
    NOT_HOLDER = -4
    WRONG_SOURCE = -5
    BAD_COUNT = -6  # the file holds another number of items than the segment registered
    ENOUGH = -7  # the queue already holds as many items as the caller refills it to


class RefillWatch(IntEnum):
    SET = 1  # the field holds the value sent (or is cleared)
    UNKNOWN_PROJECT = -1
    BAD_VALUE = -3  # not BELOW x 16 + queue bits, as claim-21.lua reads it
    NOT_HOLDER = -4


class RegisterWarrior(IntEnum):
    REGISTERED = 1
    THROTTLED = -1
    REGISTRY_FULL = -2


class Release(IntEnum):
    OK = 200
    UNKNOWN_PROJECT = -1
    STALE_AGE = -2  # classified at another settings age: reload the limits and call again


class RequeueDead(IntEnum):
    NOT_PAIRS = -1


class RollupHour(IntEnum):
    ALREADY = 0
    WRITTEN = 1


class RollupDay(IntEnum):
    HOURS_PENDING = -1
    ALREADY = 0
    WRITTEN = 1


class SampleBacklog(IntEnum):
    ALREADY = 0
    STORED = 1


class SegmentExport(IntEnum):
    NOT_REGISTERED = -1


class SegmentImport(IntEnum):
    IMPORTED = 1
    NUMBER_TAKEN = 0
    UNKNOWN_PROJECT = -1
    NO_TICKET = -2  # no export of these items waits to come back: add them through the filter


class SetBlocks(IntEnum):
    REPLACED = 1
    CHANGED = 0  # the blocks changed since the caller read them: read again and retry
    UNKNOWN_PROJECT = -1


class SetLimit(IntEnum):
    UNKNOWN_PROJECT = -1
    UNKNOWN_LIMIT = -2
    TOO_MANY = -3


class SetSettings(IntEnum):
    UNKNOWN_PROJECT = -1
    DAMAGED = -2  # ARGV is not whole pairs, or the stored age is not an integer
    CHANGED = -3  # a field is no longer what the caller checked: read again and check again


class TopHistory(IntEnum):
    NOTHING_DUE = 0


class Uploaded(IntEnum):
    OK = 200
    UNKNOWN_PROJECT = -1


class WarriorSeen(IntEnum):
    SEEN = 1
    UNKNOWN_WARRIOR = 0
    TOO_LARGE = -1  # the merged record would pass its bound: nothing written


# Script name (as lua/NAME-NKEYS.lua names it) -> its codes; the contract test walks this.
BY_SCRIPT: dict[str, type[IntEnum]] = {
    "bloom_add": BloomAdd,
    "bloom_configure": BloomConfigure,
    "bury_unservable": BuryUnservable,
    "claim": Claim,
    "clear_queue": ClearQueue,
    "create_project": CreateProject,
    "done": Done,
    "pad_hashes": PadHashes,
    "hold_limited": HoldLimited,
    "hold_queued": HoldQueued,
    "item_status": ItemStatus,
    "log_archive": LogArchive,
    "maintain_lease": MaintainLease,
    "move_items": MoveItems,
    "offload_abort": OffloadAbort,
    "offload_commit": OffloadCommit,
    "offload_stage": OffloadStage,
    "redo_items": RedoItems,
    "refill": Refill,
    "refill_watch": RefillWatch,
    "register_warrior": RegisterWarrior,
    "release": Release,
    "requeue_dead": RequeueDead,
    "rollup_day": RollupDay,
    "rollup_hour": RollupHour,
    "sample_backlog": SampleBacklog,
    "segment_export": SegmentExport,
    "segment_import": SegmentImport,
    "set_blocks": SetBlocks,
    "set_limit": SetLimit,
    "set_settings": SetSettings,
    "top_history": TopHistory,
    "uploaded": Uploaded,
    "warrior_seen": WarriorSeen,
}

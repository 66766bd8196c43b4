"""The one home for calling a Lua script: one binding per file of ``tracker_core/lua/``.

``scripts.claim(conn, k, now_ms=..., downloader=..., ...)`` runs claim-21.lua for the project
whose keys are K (any keys.ProjectKeys), building its KEYS and ARGV from the binding's
declaration; ``scripts.claim.codes`` names its reply codes, ``scripts.claim.Reply`` its reply's
shape. Nothing outside this package knows a script's argument order. The modules:

- loading: the Lua files read, their --@include and --@constants lines inlined, their SHAs;
- sending: EVALSHA, the source once on NOSCRIPT, ScriptError;
- binding: how a binding is declared (Binding, its key and argument slots) and called;
- packed: claim and done as ready RESP bytes for the request hot path (RawRedis);
- requests, queues, projects, backfeed_filter, offloading, statistics, warriors, notifying: the
  bindings, by what their scripts serve, each with its codes and reply shape.

tests/lua/test_contract.py checks every binding against its file's contract header. The
numbers both languages use are in ``constants``; ``derived_counters`` adds up the counters the
scripts no longer store.

May import: tracker_core.keyspace, tracker_core.blocks (the IP key the claim script compares).
"""

from __future__ import annotations

from tracker_core.scripts.backfeed_filter import bloom_add, bloom_configure
from tracker_core.scripts.binding import Binding, wire
from tracker_core.scripts.loading import LUA_DIR, SCRIPTS, Script
from tracker_core.scripts.notifying import notify_claim, notify_emit, notify_finish, notify_hooks
from tracker_core.scripts.offloading import (
    log_archive,
    maintain_lease,
    offload_abort,
    offload_commit,
    offload_stage,
    refill,
    refill_watch,
    segment_export,
    segment_import,
)
from tracker_core.scripts.packed import PackedCall, packed_claim, packed_done
from tracker_core.scripts.projects import create_project, pad_hashes, set_blocks, set_limit, set_settings
from tracker_core.scripts.queues import (
    clear_queue,
    hold_limited,
    hold_queued,
    item_status,
    move_items,
    redo_items,
    requeue_dead,
)
from tracker_core.scripts.requests import bury_unservable, claim, done, release, uploaded
from tracker_core.scripts.sending import ScriptError
from tracker_core.scripts.statistics import rollup_day, rollup_hour, sample_backlog, top_history
from tracker_core.scripts.warriors import register_warrior, warrior_seen

OK = 200  # the code of a script that answers {200, ...} when it did its work
UNKNOWN_PROJECT = -1  # every script that checks the settings hash: the project does not exist

# Script name (as lua/NAME-NKEYS.lua names it) -> its binding; the contract test walks this.
BINDINGS: dict[str, Binding] = {
    binding.name: binding
    for binding in (
        bloom_add,
        bloom_configure,
        bury_unservable,
        claim,
        clear_queue,
        create_project,
        done,
        hold_limited,
        hold_queued,
        item_status,
        log_archive,
        maintain_lease,
        move_items,
        notify_claim,
        notify_emit,
        notify_finish,
        notify_hooks,
        offload_abort,
        offload_commit,
        offload_stage,
        pad_hashes,
        redo_items,
        refill,
        refill_watch,
        register_warrior,
        release,
        requeue_dead,
        rollup_day,
        rollup_hour,
        sample_backlog,
        segment_export,
        segment_import,
        set_blocks,
        set_limit,
        set_settings,
        top_history,
        uploaded,
        warrior_seen,
    )
}

__all__ = [
    "BINDINGS",
    "LUA_DIR",
    "OK",
    "SCRIPTS",
    "UNKNOWN_PROJECT",
    "Binding",
    "PackedCall",
    "Script",
    "ScriptError",
    "packed_claim",
    "packed_done",
    "wire",
    *BINDINGS,
]

"""Numbers both languages use: written once here, put into the Lua scripts when they are loaded.

A script line ``--@constants NAME OTHER`` becomes ``local NAME = <value>`` for each name
(tracker_core.scripts does it at load, so the SHA covers the values), and the Python side
imports the same names from here: no number is written in both languages, and a script that
asks for a name this module lacks fails to load. Integers and floats go in as Lua numbers,
tuples of them as Lua tables (``{1, 5, 15}``).
"""

from __future__ import annotations

from tracker_core import keyspace

# Per-minute counter hashes live two days (lua/includes/counters.lua gives them their expiry
# at their first increment; the statistics read them).
MINUTE_TTL_S = 172_800
# The daily unique-downloader and unique-IP HyperLogLogs (claim) are kept 62 days, so a month's
# count (PFCOUNT over its days) can still be read in the month after.
UNIQUES_TTL_S = 62 * 86_400
# The RTT histogram's upper bounds, seconds: done counts each item under rtt_le_B, the
# statistics turn the counts into percentiles.
RTT_BOUNDS_S = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 10800, 43200)
# Defaults of settings a project may lack (settings.py offers them, the scripts fall back to
# them): 6 h before a claim may be reclaimed; 100 GB credited per item at most (one done tops
# no leaderboard); 100,000 entries kept in the done log before archiving.
DEFAULT_RECLAIM_TTL_S = 21_600
DEFAULT_MAX_BYTES_PER_ITEM = 10**11
DEFAULT_LOG_MAXLEN = 100_000
# Most items one claim hands out: the claim script returns all names in one reply.
MAX_MULTI_CEILING = 1000
# Earlier claim rounds kept per item in reclaim_history (the latest ones): a dead item carries
# every holder it had.
RECLAIM_HISTORY_ROUNDS = 50
# Arguments per Redis command when a script spreads a list over several (Lua's unpack stops
# near 8,000 values).
UNPACK_CHUNK = 2000
# Distinct backfeed shard names counted per project (beyond: 'other'), and distinct domains in
# domain_bytes (beyond: 'other'): anonymous clients choose both names.
MAX_SHARDS = 1000
MAX_DOMAIN_FIELDS = 64
# bad_dones: a capped stream of dones for names that were not out, each entry holding at most
# BAD_ITEMS_BYTES of the names (about 12 MB in all).
BAD_DONES_MAXLEN = 10_000
BAD_ITEMS_BYTES = 1024
# log_maxlen is handed to XADD as an integer; done cuts the log itself only at this safety
# bound (FACTOR x log_maxlen, at least MIN), for when no maintainer archives it.
MAX_LOG_MAXLEN = 10**9
LOG_SAFETY_FACTOR = 10
LOG_SAFETY_MIN = 100_000

# Refill on demand (tracker_core.offload.demand): while segments of shared queues wait on disk,
# `tracker maintain` keeps this settings field at BELOW x 16 + QUEUES (a queue size, and a bit
# per shared queue whose segments wait: 1 todo, 2 backfeed, 4 secondary, 8 redo); a claim that
# finds one of them under BELOW takes the field away and publishes the settings key on
# REFILL_CHANNEL.
REFILL_WATCH_FIELD = "refill_watch"
REFILL_CHANNEL = keyspace.REFILL_CHANNEL

# A settings hash holds about 35 fields, and Redis keeps a hash that small as a listpack, which
# HMGET searches field by field. One field whose value is longer than hash-max-listpack-value
# (64 bytes by default) keeps the hash in the hashtable encoding, across restarts and AOF
# rewrites too (Redis never turns a hash back). create_project and set_settings write it,
# pad_hashes-2.lua for projects an older tracker made; settings.with_stored leaves it out of
# what is shown (docs/data-model.md, "Settings").
SETTINGS_PAD_FIELD = "_hashtable"
SETTINGS_PAD = (
    "This field keeps the hash in the hashtable encoding, so a lookup is one hash and not a scan "
    "(see docs/data-model.md)."
)
# The stats hash likewise: some 60 counters in time, claim and done bump several each call, and
# a counter made late sits at the end of a listpack. Its readers turn every value into a number,
# so here the field's NAME is the long part and its value 0: derived_counters.with_derived drops
# it, and a reader that did not would add 0. create_project and pad_hashes-2.lua write it. What
# both pads buy a claim and a done: docs/performance.md, the hash_encoding study.
STATS_PAD_FIELD = (
    "_hashtable: a field name over hash-max-listpack-value keeps this hash a hashtable; not a counter"
)


def lua_value(value) -> str:
    """VALUE as a Lua literal: a number, a table of numbers for a tuple, or a quoted string of
    printable ASCII (no quote or backslash, so it needs no escaping)."""
    if isinstance(value, tuple):
        return "{" + ", ".join(lua_value(v) for v in value) + "}"
    if isinstance(value, str):
        if not (value.isascii() and value.isprintable()) or "'" in value or "\\" in value:
            raise TypeError(f"no Lua literal for {value!r}")
        return f"'{value}'"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"no Lua literal for {value!r}")
    return repr(value)

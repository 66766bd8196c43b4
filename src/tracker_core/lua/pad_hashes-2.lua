--[[ pad_hashes: give a project's settings and stats the fields that keep them hashtables.

KEYS[1] settings (hash)  KEYS[2] stats (hash)

Redis keeps a hash of few short fields as a listpack, which HMGET and HINCRBY search field by
field; claim and done read the settings and bump the stats on every call. A field longer than
hash-max-listpack-value makes a hash a hashtable for good (script_constants.py): create_project
writes both (SETTINGS_PAD_FIELD with its text, STATS_PAD_FIELD with 0), and `tracker maintain`
runs this once for each project an older tracker created (admin/upgrades.py). Idempotent; the
settings age is not bumped (no setting changes).
Returns 1 when both fields are there, -1 for an unknown project (nothing written: a project
deleted meanwhile gets no stray hash).
Reply codes by name: scripts.pad_hashes.codes (Python callers compare against those names).
]]
--@constants SETTINGS_PAD_FIELD SETTINGS_PAD STATS_PAD_FIELD
local settings_key = KEYS[1]
local stats_key    = KEYS[2]
if redis.call('EXISTS', settings_key) == 0 then return -1 end
redis.call('HLEN', stats_key)   -- its type, before the first write
redis.call('HSET', settings_key, SETTINGS_PAD_FIELD, SETTINGS_PAD)
redis.call('HSETNX', stats_key, STATS_PAD_FIELD, '0')
return 1

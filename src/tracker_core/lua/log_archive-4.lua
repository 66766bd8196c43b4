--[[ log_archive: register a durable log segment file and trim its entries from the stream, in one step.

KEYS[1] the project's maintain lease  KEYS[2] log (stream)  KEYS[3] log_segments (hash:
number -> "FIRST_ID LAST_ID ENTRIES", '#archived' -> the last archived entry id, '#next' -> the
last number handed out)  KEYS[4] stats
ARGV[1] lease holder  ARGV[2] segment number  ARGV[3] first entry id in the file
ARGV[4] last entry id in the file  ARGV[5] entries in the file
Returns {1, trimmed}: registered, '#archived' set to ARGV[4], and every entry up to ARGV[4]
trimmed (trimmed can be below ARGV[5] when the done script's safety bound dropped some of them
meanwhile: they are in the file all the same). {0, 0} when the file is not the continuation of
the archive ('#archived' moved since the caller read it, the number is registered or was never
handed out, or an entry newer than '#archived' and older than ARGV[3] is in the stream, which
the file would skip); {-4, 0} when ARGV[1] does not hold the lease. On 0 and -4 nothing changes:
the caller leaves its file unregistered (removed later) and stops its pass.
The file is written and fsynced before this runs, so an entry leaves Redis only once on disk.
Reply codes by name: scripts.log_archive.codes (Python callers compare against those names).
]]
--@include counters
local lease_key        = KEYS[1]
local log_key          = KEYS[2]
local log_segments_key = KEYS[3]
local stats_key        = KEYS[4]
if redis.call('GET', lease_key) ~= ARGV[1] then return {-4, 0} end
local number, first, last, entries = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local function parse(id)
  local ms, seq = string.match(id or '', '^(%d+)%-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local first_ms, first_seq = parse(first)
local last_ms, last_seq = parse(last)
if not first_ms or not last_ms or not entries or entries < 1 then
  return redis.error_reply('log_archive: ARGV[3], ARGV[4] must be stream ids, ARGV[5] a count')
end
if redis.call('HEXISTS', log_segments_key, number) == 1 then return {0, 0} end
local handed_out = tonumber(redis.call('HGET', log_segments_key, '#next') or '0')
if not tonumber(number) or tonumber(number) < 1 or tonumber(number) > handed_out then return {0, 0} end
local archived = redis.call('HGET', log_segments_key, '#archived')
if archived then
  local a_ms, a_seq = parse(archived)
  if not a_ms or a_ms > first_ms or (a_ms == first_ms and a_seq >= first_seq) then return {0, 0} end
end
-- Nothing unarchived may sit between the archive's end and the file's first entry.
local gap = redis.call('XRANGE', log_key, archived and ('(' .. archived) or '-', '(' .. first,
                       'COUNT', 1)
if #gap > 0 then return {0, 0} end
redis.call('HSET', log_segments_key, number, first .. ' ' .. last .. ' ' .. entries, '#archived', last)
-- MINID keeps ids >= its argument: the id right after LAST (same ms, next sequence number).
local trimmed = redis.call('XTRIM', log_key, 'MINID',
                          string.match(last, '^%d+') .. '-' .. string.format('%d', last_seq + 1))
bump(stats_key, nil, 'log_entries_archived', entries)
return {1, trimmed}

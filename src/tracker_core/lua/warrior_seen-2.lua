--[[ warrior_seen: note a registered warrior's heartbeat and keep what it carried, and forget
long-silent warriors.

KEYS[1] warriors       hash  warrior id -> JSON record (version, ip, registered_ms, and what
                             the last heartbeat carried: downloader, selected_project, lat_lng,
                             seen_ms)
KEYS[2] warriors:seen  zset  warrior id -> last heartbeat (ms)

ARGV[1] now (ms)  ARGV[2] warrior id
ARGV[3] forget warriors silent since before this time (ms)
ARGV[4] the heartbeat: a JSON object of validated fields (downloader, selected_project,
        lat_lng, ip, seen_ms; version goes into the record's "warrior" object), each replacing
        the record's; fields it does not hold keep their value
ARGV[5] most bytes a record may take

Returns 1; 0 for a heartbeat from an id the registry does not know (the caller still
answers: a warrior must never be sent into a retry loop), which adds nothing: only
register_warrior adds warriors, within the registry's bounds; -1 when the merged record would
pass ARGV[5] (nothing written: the caller validates every field, so this is a guard).
At most 100 stale warriors are forgotten per call, so the registry stays bounded without a
sweep that could stall Redis.
Reply codes by name: scripts.warrior_seen.codes (Python callers compare against those names).
]]
local warriors_key = KEYS[1]
local seen_key     = KEYS[2]
local now, id = tonumber(ARGV[1]), ARGV[2]
local stored = redis.call('HGET', warriors_key, id)
if not stored then
  return 0
end
-- Everything that can fail comes before the first write (Redis keeps a failed script's writes).
local ok, record = pcall(cjson.decode, stored)
if not ok or type(record) ~= 'table' then record = {} end
if type(record.warrior) ~= 'table' then record.warrior = {} end
for field, value in pairs(cjson.decode(ARGV[4])) do
  if field == 'version' then
    record.warrior.version = value
  else
    record[field] = value
  end
end
local merged = cjson.encode(record)
if #merged > tonumber(ARGV[5]) then
  return -1
end
redis.call('HSET', warriors_key, id, merged)
redis.call('ZADD', seen_key, now, id)
local stale = redis.call('ZRANGEBYSCORE', seen_key, '-inf', '(' .. ARGV[3], 'LIMIT', 0, 100)
if #stale > 0 then
  redis.call('ZREM', seen_key, unpack(stale))
  redis.call('HDEL', warriors_key, unpack(stale))
end
return 1

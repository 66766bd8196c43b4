--[[ top_history: record the top downloaders' item counts once per interval.

KEYS[1] downloader_bytes  zset  downloader -> bytes (ranks the top N; only those N are read)
KEYS[2] downloader_count  hash  downloader -> items done
KEYS[3..] top_history:S   stream, one per resolution: fields downloader -> items done

ARGV[1] now (ms)   ARGV[2] N   then for each stream: interval (ms), entries kept, expiry (ms)

Returns how many streams got a point (0 when all had one for this interval or nobody did
anything yet).
Reply codes by name: scripts.top_history.codes (Python callers compare against those names).
]]
local downloader_bytes_key = KEYS[1]
local downloader_count_key = KEYS[2]
local FIRST_STREAM = 3  -- KEYS[3 ..]: one stream per resolution
local now = tonumber(ARGV[1])
local due = {}
for i = FIRST_STREAM, #KEYS do
  local interval = tonumber(ARGV[3 * (i - 2)])
  local last = redis.call('XREVRANGE', KEYS[i], '+', '-', 'COUNT', 1)
  local last_ms = #last > 0 and tonumber(string.match(last[1][1], '^%d+'))
  if not last_ms or math.floor(last_ms / interval) < math.floor(now / interval) then
    due[#due + 1] = i
  end
end
if #due == 0 then return 0 end
local top = redis.call('ZREVRANGE', downloader_bytes_key, 0, tonumber(ARGV[2]) - 1)
if #top == 0 then return 0 end
local counts = redis.call('HMGET', downloader_count_key, unpack(top))
local fields = {}
for j, name in ipairs(top) do
  fields[#fields + 1] = name
  fields[#fields + 1] = counts[j] or '0'
end
for _, i in ipairs(due) do
  local n = 3 * (i - 2)
  redis.call('XADD', KEYS[i], 'MAXLEN', ARGV[n + 1], ARGV[1] .. '-0', unpack(fields))
  redis.call('PEXPIRE', KEYS[i], ARGV[n + 2])
end
return #due

--[[ offload_stage: take items out of a queue (or done) into the set on its way to a segment file.

KEYS[1] the project's maintain lease (string: holder id)  KEYS[2] source: a todo queue, or done
KEYS[3] offloading (set)  KEYS[4] segments (hash; field '#next' numbers the segments)
KEYS[5] segment_queues (hash: segment number -> source name; field '#staged')
ARGV[1] lease holder  ARGV[2] items to take  ARGV[3] source name: todo, backfeed, secondary, redo, done
Returns {number, item...}: the segment number reserved for the file, then the items taken; the
number and source are kept in segment_queues' '#staged' field ("NUMBER NAME") until
offload_commit or offload_abort. {0} when the source is empty; {-2} when an earlier offload was
not finished (abort it first); {-4} when ARGV[1] does not hold the lease; {-3} for a bad
ARGV[2] or a '#next' that is not a number. Only {number, ...}
changes anything. The items stay counted (offloading is counted as offloaded) until
offload_commit registers the file, which the caller does once the file is durably on disk.
Reply codes by name: scripts.offload_stage.codes (Python callers compare against those names).
]]
--@constants UNPACK_CHUNK
local lease_key          = KEYS[1]
local source_key         = KEYS[2]
local offloading_key     = KEYS[3]
local segments_key       = KEYS[4]
local segment_queues_key = KEYS[5]
if redis.call('GET', lease_key) ~= ARGV[1] then return {-4} end
if redis.call('EXISTS', offloading_key) == 1 or redis.call('HEXISTS', segment_queues_key, '#staged') == 1 then
  return {-2}
end
-- What can fail is checked before the SPOP: a failure after it would leave the taken items in
-- `offloading` without '#staged' (Redis keeps a failed script's writes).
local count = tonumber(ARGV[2])
if not count or count < 1 then return {-3} end
local next_number = redis.call('HGET', segments_key, '#next')
if next_number and not string.match(next_number, '^%d+$') then return {-3} end
redis.call('HLEN', segment_queues_key)
local taken = redis.call('SPOP', source_key, count)
if #taken == 0 then return {0} end
for i = 1, #taken, UNPACK_CHUNK do
  redis.call('SADD', offloading_key, unpack(taken, i, math.min(i + UNPACK_CHUNK - 1, #taken)))
end
local number = redis.call('HINCRBY', segments_key, '#next', 1)
redis.call('HSET', segment_queues_key, '#staged', number .. ' ' .. ARGV[3])
table.insert(taken, 1, number)
return taken

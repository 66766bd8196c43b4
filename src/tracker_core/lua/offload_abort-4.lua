--[[ offload_abort: put staged items of an unfinished offload back where they came from, a chunk at a time.

KEYS[1] the project's maintain lease  KEYS[2] offloading (set)  KEYS[3] segment_queues (hash;
'#staged' is "NUMBER SOURCE")  KEYS[4] the source the staged items came from
ARGV[1] lease holder  ARGV[2] source name (todo when '#staged' is missing)  ARGV[3] most items to move
Returns {moved, left}: left is what stays staged (call again until 0; '#staged' goes with the
last item); {-4, 0} when ARGV[1] does not hold the lease; {-5, 0} when the staged items came from
another source than ARGV[2]. Nothing changes on -4 and -5. Each call costs O(ARGV[3]), never the
size of the source queue. The file written for them, if any, is not registered: the caller
deletes it.
Reply codes by name: scripts.offload_abort.codes (Python callers compare against those names).
]]
--@constants UNPACK_CHUNK
local lease_key          = KEYS[1]
local offloading_key     = KEYS[2]
local segment_queues_key = KEYS[3]
local source_key         = KEYS[4]
if redis.call('GET', lease_key) ~= ARGV[1] then return {-4, 0} end
local staged = redis.call('HGET', segment_queues_key, '#staged')
local source = staged and string.match(staged, '^%d+ (.+)$') or 'todo'
if source ~= ARGV[2] then return {-5, 0} end
redis.call('SCARD', source_key)       -- a wrong type fails here, before any item leaves `offloading`
local items = redis.call('SPOP', offloading_key, tonumber(ARGV[3]))
for i = 1, #items, UNPACK_CHUNK do
  redis.call('SADD', source_key, unpack(items, i, math.min(i + UNPACK_CHUNK - 1, #items)))
end
local left = redis.call('SCARD', offloading_key)
if left == 0 then redis.call('HDEL', segment_queues_key, '#staged') end
return {#items, left}

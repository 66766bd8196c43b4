--[[ set_blocks: replace a project's blocks and their lookup index, if nobody changed them since.

KEYS[1] settings        hash  the project's settings (its absence means: unknown project); its
                              field blocked_index_size is set to KEYS[4]'s size with the index
KEYS[2] blocked         set   the project's own entries ("name:D", "ip:ADDRESS", "ip:CIDR")
KEYS[3] blocked_global  set   the project's copy of the global entries
KEYS[4] blocked_index   zset  score 0: what claim-21.lua looks up (tracker_core/blocks.py)

ARGV[1] n1  ARGV[2] n2  ARGV[3] n3  ARGV[4] n4, then n1 entries: KEYS[2] as the caller read it,
n2 entries: KEYS[3] as read, n3 entries: KEYS[2]'s new content, n4: KEYS[3]'s new content, and
the rest: every member of the new index.

Returns 1 when replaced, 0 (nothing changed) when KEYS[2] or KEYS[3] no longer hold what the
caller read (another change came between: the caller reads again and retries), -1 for an
unknown project. The index is computed by the caller (Lua cannot parse IP addresses); the
read-check makes the sets and the index always agree. All checks come before the first write.
blocked_index_size lets claim-21.lua skip its two block lookups when it reads '0' (most projects
have no blocks); written here in the same step as the index, the only writer of the index, it
cannot say 0 while a block is indexed. A project whose settings lack it (made before it) is
checked as before, until its blocks are next written.
Reply codes by name: scripts.set_blocks.codes (Python callers compare against those names).
]]
--@constants UNPACK_CHUNK
local settings_key       = KEYS[1]
local blocked_key        = KEYS[2]
local blocked_global_key = KEYS[3]
local blocked_index_key  = KEYS[4]
if redis.call('EXISTS', settings_key) == 0 then return -1 end
local n = {tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])}
for i = 1, 4 do
  if not n[i] or n[i] < 0 or n[i] ~= math.floor(n[i]) then
    return redis.error_reply('set_blocks: ARGV[1..4] must be counts')
  end
end
if 4 + n[1] + n[2] + n[3] + n[4] > #ARGV then
  return redis.error_reply('set_blocks: fewer entries than the counts say')
end

-- Whether set KEY holds exactly ARGV[first .. first + count - 1].
local function holds_exactly(key, first, count)
  if redis.call('SCARD', key) ~= count then return false end
  for i = first, first + count - 1, UNPACK_CHUNK do
    local found = redis.call('SMISMEMBER', key,
                             unpack(ARGV, i, math.min(i + UNPACK_CHUNK - 1, first + count - 1)))
    for _, one in ipairs(found) do
      if one ~= 1 then return false end
    end
  end
  return true
end
local at = 5
if not holds_exactly(blocked_key, at, n[1]) then return 0 end
at = at + n[1]
if not holds_exactly(blocked_global_key, at, n[2]) then return 0 end
at = at + n[2]

local function fill(command, key, first, last, score)
  for i = first, last, UNPACK_CHUNK do
    local args = {}
    for j = i, math.min(i + UNPACK_CHUNK - 1, last) do
      if score then args[#args + 1] = 0 end
      args[#args + 1] = ARGV[j]
    end
    redis.call(command, key, unpack(args))
  end
end
redis.call('DEL', blocked_key, blocked_global_key, blocked_index_key)
fill('SADD', blocked_key, at, at + n[3] - 1)
at = at + n[3]
fill('SADD', blocked_global_key, at, at + n[4] - 1)
at = at + n[4]
fill('ZADD', blocked_index_key, at, #ARGV, true)
redis.call('HSET', settings_key, 'blocked_index_size', redis.call('ZCARD', blocked_index_key))
return 1

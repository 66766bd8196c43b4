--[[ maintain_lease: take, renew or give up a project's maintenance lease.

KEYS[1] the lease (string: holder id)
ARGV[1] holder id   ARGV[2] lease length (ms)   ARGV[3] 'release' to give it up (optional)
Returns 1 when ARGV[1] holds the lease (taken or renewed), 0 when another holder has it.
With 'release': 1 when ARGV[1] held it and it is now free, 0 otherwise (nothing changes).
Every script that moves the project's segments checks the holder in the same step.
Reply codes by name: scripts.maintain_lease.codes (Python callers compare against those names).
]]
local lease_key = KEYS[1]
local holder = redis.call('GET', lease_key)
if ARGV[3] == 'release' then
  if holder ~= ARGV[1] then return 0 end
  redis.call('DEL', lease_key)
  return 1
end
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', lease_key, ARGV[1], 'PX', tonumber(ARGV[2]))
return 1

--[[ maintain_lease: take or renew the maintenance lease.

KEYS[1] the lease (string: holder id)
ARGV[1] holder id   ARGV[2] lease length (ms)
Returns 1 when ARGV[1] holds the lease (taken or renewed), 0 when another holder has it.
]]
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
return 1

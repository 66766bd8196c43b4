--[[ offload_abort: put the items of an unfinished offload back into todo.

KEYS[1] offloading (set)  KEYS[2] todo (set)
Returns the number put back. Used after a crash between staging and commit; the file written
for them, if any, is not registered and is deleted by the caller.
]]
local n = redis.call('SCARD', KEYS[1])
if n > 0 then
  redis.call('SUNIONSTORE', KEYS[2], KEYS[2], KEYS[1])
  redis.call('DEL', KEYS[1])
end
return n

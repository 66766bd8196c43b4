-- Put one item back where it waits to be served: the target queue, or, when the caller
-- classified it as held by a limit (HELD_ENTRY is "LIMIT\0ITEM", '' when not), the way-in set
-- of held items, which hold_limited then files. Returns true when it went to the target queue.
-- Every script that returns items to a shared queue goes through here, so none bypasses a limit.
local function enqueue_or_hold(target, limited_in, item, held_entry)
  if held_entry == '' then
    redis.call('SADD', target, item)
    return true
  end
  redis.call('SADD', limited_in, held_entry)
  return false
end

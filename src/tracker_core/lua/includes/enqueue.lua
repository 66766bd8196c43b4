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

-- Read the types of both places enqueue_or_hold writes to, before a script's first write: a
-- wrong type then fails the script while nothing has moved, never after an item left its place.
local function check_enqueue_keys(target, limited_in)
  redis.call('SCARD', target)
  redis.call('SCARD', limited_in)
end

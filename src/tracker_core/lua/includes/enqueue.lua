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

-- Move each item of ARGS that TAKE takes from its place (TAKE(item) returns 1 when the item was
-- there and is removed) into TARGET or the way-in set. ARGS is the scripts' ARGV: [1] the
-- downloader owning TARGET or '', [2...] pairs of an item and its held entry. The owner's queue
-- is registered in OWNERS (todo:d) once an item reached TARGET. Returns how many moved.
local function enqueue_taken(args, take, target, limited_in, owners)
  local moved, to_target = 0, 0
  for i = 2, #args - 1, 2 do
    if take(args[i]) == 1 then
      if enqueue_or_hold(target, limited_in, args[i], args[i + 1]) then to_target = to_target + 1 end
      moved = moved + 1
    end
  end
  if to_target > 0 and args[1] ~= '' then redis.call('SADD', owners, args[1]) end
  return moved
end

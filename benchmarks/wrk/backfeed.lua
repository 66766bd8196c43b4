-- POST 400-item backfeed batches, as grab scripts do (NUL-joined, trailing NUL).
--   wrk -t2 -c8 -d5s -s backfeed.lua http://127.0.0.1:PORT/backfeed/legacy/PROJECT-SECRET -- new
-- "new": every post carries 400 items never sent before; "seen": the same 400 items every time.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "report.lua")

local counter = 0
local mode = "new"
local fixed_body
function init(args)
  mode = args[1] or "new"
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/octet-stream"
  local items = {}
  for i = 1, 400 do items[i] = string.format("https://example.com/seen/%d\0", i) end
  fixed_body = table.concat(items)
end

function request()
  if mode == "seen" then return wrk.format(nil, nil, nil, fixed_body) end
  counter = counter + 1
  local items = {}
  for i = 1, 400 do
    items[i] = string.format("https://example.com/t%d/p%d/%d\0", thread_id or 0, counter, i)
  end
  return wrk.format(nil, nil, nil, table.concat(items))
end

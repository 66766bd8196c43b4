-- request.lua with a pause after each response on every connection, so that many connections
-- offer a fixed, below-saturation load (wrk2 is not packaged; this is the nearest wrk gets).
--   wrk -t2 -c70 -d5s -s paced_request.lua URL -- PAUSE_MS
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "request.lua")

local request_init = init
local pause_ms = 10
function init(args)
  request_init(args)
  pause_ms = tonumber(args[1]) or pause_ms
end

function delay()
  return pause_ms
end

-- POST the warrior's request body, as seesaw-kit sends it, with varied downloader names.
--   wrk -t2 -c16 -d5s -s request.lua http://127.0.0.1:PORT/PROJECT/request
--   (add -H "Connection: close" for one TCP connection per request, as warriors do)
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "report.lua")

local counter = 0
function init(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["User-Agent"] = "ArchiveTeam Warrior/0.10.3 Standalone"
end

function request()
  counter = counter + 1
  -- 500 names per wrk thread: enough that per-downloader keys are spread, as with real warriors.
  local name = string.format("warrior%d-%d", thread_id or 0, counter % 500)
  return wrk.format(nil, nil, nil,
    '{"downloader":"' .. name .. '","api_version":"2","version":"20240101.01"}')
end

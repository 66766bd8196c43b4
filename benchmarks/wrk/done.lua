-- POST /PROJECT/done for items claimed beforehand, one per request, attributed to their claimant.
--   wrk -t2 -c16 -d5s -s done.lua http://127.0.0.1:PORT/PROJECT/done -- CLAIMS_FILE THREADS
-- CLAIMS_FILE holds "DOWNLOADER<TAB>ITEM" lines; thread i takes lines i, i+THREADS, ... When a
-- thread runs out it starts over: those dones are repeats (idempotent, answered OK, counted once).
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "report.lua")

local claims = {}
local next_claim = 1
function init(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["User-Agent"] = "ArchiveTeam Warrior/0.10.3 Standalone"
  local threads = tonumber(args[2]) or 1
  local index = 0
  for line in io.lines(args[1]) do
    if index % threads == (thread_id or 0) then
      local downloader, item = line:match("^([^\t]+)\t(.+)$")
      claims[#claims + 1] = '{"downloader":"' .. downloader .. '","version":"20240101.01",' ..
        '"item":"' .. item .. '","bytes":{"data":1048576},"id":{"sha1":"bench"}}'
    end
    index = index + 1
  end
end

function request()
  local body = claims[next_claim]
  next_claim = next_claim % #claims + 1
  return wrk.format(nil, nil, nil, body)
end

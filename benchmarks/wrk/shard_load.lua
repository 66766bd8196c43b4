-- Claims (and dones of what was claimed) over one or several projects, for shard_scale.py.
--   wrk -t2 -c64 -d10s -s shard_load.lua http://127.0.0.1:PORT/ -- MODE MULTI PROJECT[,PROJECT...]
-- MODE "claim": POST /P/request (or /P/multi=MULTI/request) only; claimed items stay out.
-- MODE "cycle": every claimed batch is reported done (POST /P/done, all of its names in one
-- body) by the thread's next request, so items claimed and done per second is the done rate. Projects are taken in turn.
-- Prints report.lua's BENCH_JSON line with "counts": claims answered 200, items they held, 404s
-- (nothing to give), dones answered 200, other statuses, summed over the threads.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "report.lua")

local report_done = done
local threads = {}
local base_setup = setup
function setup(thread)
  base_setup(thread)
  threads[#threads + 1] = thread
end

local mode, multi, projects = "claim", 1, {}
local counter = 0
local pending = {}  -- done bodies waiting to be sent, oldest first
claims_ok, items, empty, dones_ok, other = 0, 0, 0, 0, 0

function init(args)
  mode = args[1] or "claim"
  multi = tonumber(args[2]) or 1
  for name in string.gmatch(args[3] or "bench", "[^,]+") do projects[#projects + 1] = name end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["User-Agent"] = "ArchiveTeam Warrior/0.10.3 Standalone"
end

local function claim_path(project)
  if multi > 1 then return "/" .. project .. "/multi=" .. multi .. "/request" end
  return "/" .. project .. "/request"
end

function request()
  if #pending > 0 then
    local job = table.remove(pending, 1)
    return wrk.format(nil, "/" .. job[1] .. "/done", nil, job[2])
  end
  counter = counter + 1
  local project = projects[counter % #projects + 1]
  -- 100 names per wrk thread: per-downloader keys spread, and few enough that every worker
  -- has counted each in the day's uniques during the warm-up (a first claim of a name in a
  -- worker also writes the project's uniques: a run's cost, not the steady state's).
  local name = string.format("warrior%d-%d", thread_id or 0, counter % 100)
  return wrk.format(nil, claim_path(project), nil,
    '{"downloader":"' .. name .. '","api_version":"2","version":"20240101.01"}')
end

-- A thread's connections answer in any order, so an answer says what it was: a done's is "OK",
-- a claim's JSON names its items, and an item's name says its project (shard_scale.py seeds
-- https://PROJECT.example.com/... names).
function response(status, headers, body)
  if body == "OK" then dones_ok = dones_ok + 1 return end
  if status == 404 then empty = empty + 1 return end
  if status ~= 200 then other = other + 1 return end
  claims_ok = claims_ok + 1
  local names = body:match('"item_name":%s*"(.-)"')
  if not names then return end
  local _, nuls = string.gsub(names, "\\u0000", "")
  items = items + nuls + 1
  if mode == "cycle" then
    local project = names:match("^https?://([^./]+)%.") or projects[1]
    local downloader = string.format("finisher%d", thread_id or 0)
    pending[#pending + 1] = {project, '{"downloader":"' .. downloader ..
      '","version":"20240101.01","item":"' .. names ..
      '","bytes":{"data":1048576},"id":{"sha1":"bench"}}'}
  end
end

function done(summary, latency, requests)
  local total = {claims_ok = 0, items = 0, empty = 0, dones_ok = 0, other = 0}
  for _, thread in ipairs(threads) do
    for key in pairs(total) do total[key] = total[key] + (thread:get(key) or 0) end
  end
  io.write(string.format(
    'BENCH_COUNTS {"claims_ok":%d,"items":%d,"empty":%d,"dones_ok":%d,"other":%d}\n',
    total.claims_ok, total.items, total.empty, total.dones_ok, total.other))
  report_done(summary, latency, requests)
end

-- GET the URL over and over, as an anonymous client (a scraper, a viewer's browser) would.
--   wrk -t2 -c8 -d10s -s get.lua http://127.0.0.1:PORT/metrics
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "report.lua")

-- A claim's record in `claims` (docs/data-model.md; tracker_core/items/claim_records.py reads it the
-- same way): "DOWNLOADER\tIP\tTIMES_CLAIMED\tCLAIMED_MS". A record of three fields was written
-- before claim times were kept, and its `out` score is the claim time. Returns the holder, the
-- IP, the times claimed and the claim time (numbers; the claim time nil for a record of three
-- fields), or nothing for a record the scripts did not write.
local function parse_claim(record)
  local holder, ip, times, claimed = string.match(record, '^([^\t]*)\t([^\t]*)\t(%d+)\t(%d+)$')
  if holder then return holder, ip, tonumber(times), tonumber(claimed) end
  holder, ip, times = string.match(record, '^([^\t]*)\t([^\t]*)\t(%d+)$')
  if holder then return holder, ip, tonumber(times), nil end
end

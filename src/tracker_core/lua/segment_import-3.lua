--[[ segment_import: register a segment file the admin brought (back) into the project.

KEYS[1] settings  KEYS[2] segments (hash)  KEYS[3] stats
ARGV[1] segment number (from the segments' '#next' counter)  ARGV[2] items in the file
Returns 1; -1 for an unknown project; 0 when the number is taken (nothing changes).
]]
--@include counters
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 0 end
bump(KEYS[3], nil, 'items_imported', tonumber(ARGV[2]))
return 1

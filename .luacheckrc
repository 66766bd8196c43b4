-- luacheck (make lint) on the Redis scripts of src/tracker_core/lua/.
--
-- Redis runs them on Lua 5.1 with its own libraries as globals, and refuses a script that sets a
-- global. At load time (tracker_core/scripts/loading.py) a line `--@include NAME` is replaced by
-- lua/includes/NAME.lua and a line `--@constants A B` by `local A = ...`: each script is checked
-- knowing the names its own includes define and its own constants, and no others.

std = "lua51"
max_line_length = 110
read_globals = { "redis", "KEYS", "ARGV", "cjson", "cmsgpack", "bit", "struct" }
-- `not (x <= y)` is how the scripts catch NaN too (where `x > y` would let it through).
ignore = { "581" }

local lua_dir = "src/tracker_core/lua/"

local function read(path)
  local file = assert(io.open(path))
  local text = file:read("*a")
  file:close()
  return text
end

-- The top-level names an include defines (`local function f` or `local x =` at column 0).
local function defined_names(text)
  local names = {}
  for name in text:gmatch("\nlocal function ([%w_]+)") do names[#names + 1] = name end
  for name in text:gmatch("\nlocal ([%w_]+) =") do names[#names + 1] = name end
  return names
end

local function constant_names(text)
  local names = {}
  for line in text:gmatch("%-%-@constants([^\n]*)") do
    for name in line:gmatch("[%w_]+") do names[#names + 1] = name end
  end
  return names
end

local function known_names(text)
  local names = constant_names(text)
  for include in text:gmatch("%-%-@include ([%w_]+)") do
    local included = read(lua_dir .. "includes/" .. include .. ".lua")
    for _, list in ipairs({ defined_names("\n" .. included), constant_names(included) }) do
      for _, name in ipairs(list) do names[#names + 1] = name end
    end
  end
  return names
end

files = {}
local listing = assert(io.popen("ls " .. lua_dir .. "*.lua " .. lua_dir .. "includes/*.lua"))
for path in listing:lines() do
  local text = read(path)
  local config = { read_globals = known_names(text) }
  if path:find("/includes/", 1, true) then
    -- An include's top-level names are used by the scripts that include it, not by itself.
    config.ignore = {}
    for _, name in ipairs(defined_names("\n" .. text)) do config.ignore[#config.ignore + 1] = "21./" .. name end
  end
  files[path] = config
end
listing:close()

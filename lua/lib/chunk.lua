--[[
chunk (a library, not a script): variadic commands over long lists, in chunks.

One call per chunk instead of one per element, and well under Lua's limit on
the values one unpack may pass (a few thousand).
]]

local CHUNK = 1000

-- Runs `cmd key [flag] <elements>` over list[from..], CHUNK elements a call
-- (an element is `stride` values: 2 for score-member pairs). Returns the sum
-- of the integer replies.
local function callChunked(cmd, key, list, stride, from, flag)
  local step = CHUNK * (stride or 1)
  local sum = 0
  for i = from or 1, #list, step do
    local last = math.min(i + step - 1, #list)
    local r
    if flag then r = redis.call(cmd, key, flag, unpack(list, i, last)) else r = redis.call(cmd, key, unpack(list, i, last)) end
    if type(r) == 'number' then sum = sum + r end
  end
  return sum
end

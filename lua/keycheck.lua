-- keycheck.lua: a guard the tests put in front of every script, in every
-- mode (LOCKGATE_TEST_KEYCHECK, server/scripts.c), never a script of its
-- own.  Redis lets a script read a key it did not declare in KEYS (Redis
-- Cluster as long as the key is local, refusing it, "non local key", only
-- while the key's slot migrates); this makes every such access an error
-- at once, so a test fails on it whatever the mode and however its slots
-- lie.  The listing scripts go without: they read what SCAN finds
-- (_list.lua).
local redis = (function(real)
  local declared = {}
  for _, k in ipairs(KEYS) do declared[k] = true end
  -- Commands that take no key, and those whose every argument is one.
  local keyless = {TIME = true, INFO = true, PUBLISH = true, SPUBLISH = true, PING = true,
                   SCAN = true, PUBSUB = true}
  local all = {DEL = true, EXISTS = true, UNLINK = true, MGET = true, TOUCH = true}
  local function check(cmd, ...)
    local c = string.upper(cmd)
    if keyless[c] then return end
    local n = all[c] and select('#', ...) or 1
    for i = 1, n do
      local k = select(i, ...)
      if not declared[k] then
        error('keycheck: ' .. c .. ' on the undeclared key ' .. tostring(k), 2)
      end
    end
  end
  return setmetatable({
    call = function(cmd, ...) check(cmd, ...) return real.call(cmd, ...) end,
    pcall = function(cmd, ...) check(cmd, ...) return real.pcall(cmd, ...) end,
  }, {__index = real})
end)(redis)

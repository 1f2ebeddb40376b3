-- lock_inspect.lua: who holds the lock, without revealing the token.
--
-- KEYS[1]  the lock's hash (see lock_acquire.lua)
-- Returns  {1, count, fence, ttl_ms, owner}  held
--          {-1}                              not held (free, or in lock-delay)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local cur = redis.call('HMGET', KEYS[1], 'c', 'f', 'x', 'o')
if not cur[1] or now >= tonumber(cur[3]) then return {-1} end
return {1, tonumber(cur[1]), tonumber(cur[2]), tonumber(cur[3]) - now, cur[4] or ''}

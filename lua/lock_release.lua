-- lock_release.lua: release one level of re-entry.
--
-- KEYS[1]  the lock's hash (see lock_acquire.lua)
-- ARGV     token, channel, message: when the lock becomes free, message is
--          published on channel so that waiting gateways try again at once
-- Returns  {1, count}  released one level; count left (0: the lock is free)
--          {-1}        nobody holds the lock
--          {-2}        another token holds it
--
-- A release ends the hold without lock-delay: the hash is deleted.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local cur = redis.call('HMGET', KEYS[1], 't', 'c', 'x')
if not cur[1] or now >= tonumber(cur[3]) then return {-1} end
if cur[1] ~= ARGV[1] then return {-2} end

local count = tonumber(cur[2]) - 1
if count > 0 then
  redis.call('HSET', KEYS[1], 'c', count)
  return {1, count}
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return {1, 0}

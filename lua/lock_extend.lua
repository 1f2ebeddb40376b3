-- lock_extend.lua: extend the holder's lease.
--
-- KEYS[1]  the lock's hash (see lock_acquire.lua)
-- ARGV     token, ttl_ms (0: the ttl the lock was taken with)
-- Returns  {1, fence, count, ttl_ms}  extended; ttl_ms is the new remaining
--                                      lease, capped by the max-hold deadline
--          {-1}                        nobody holds the lock
--          {-2}                        another token holds it
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local cur = redis.call('HMGET', KEYS[1], 't', 'c', 'f', 'x', 'h', 'l', 'd')
if not cur[1] or now >= tonumber(cur[4]) then return {-1} end
if cur[1] ~= ARGV[1] then return {-2} end

local ttl = tonumber(ARGV[2])
if ttl == 0 then ttl = tonumber(cur[7]) end
local newexp = now + ttl
local hold = tonumber(cur[5]) or 0
if hold > 0 and newexp > hold then newexp = hold end
redis.call('HSET', KEYS[1], 'x', string.format('%d', newexp))
redis.call('PEXPIRE', KEYS[1], newexp - now + (tonumber(cur[6]) or 0))
return {1, tonumber(cur[3]), tonumber(cur[2]), newexp - now}

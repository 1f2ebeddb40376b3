-- lock_acquire.lua: take an exclusive lock, or re-enter it.
--
-- KEYS[1]  the lock's hash: t token, c count, f fence, x lease end (ms),
--          d ttl it was taken with, o owner, h max-hold deadline (ms, 0 none),
--          l lock-delay (ms).  Its PEXPIRE is lease end + lock-delay, so the
--          hash outlives the lease by exactly the lock-delay.
-- KEYS[2]  the name's last fence, kept fence_keep_ms after each new holder.
-- ARGV     token, ttl_ms, owner ('' for none), max_hold_ms (0 for none),
--          lock_delay_ms, fence_keep_ms
-- Returns  {1, fence, count, ttl_ms}  acquired by a new holder
--          {2, fence, count, ttl_ms}  re-entered by the holder
--          {0, retry_after_ms}        busy (held, or in its lock-delay)
--
-- Times come from Redis's clock, never a gateway's.  A fence is at least the
-- clock in microseconds and more than the last fence: it grows across
-- expiry, and after the fence key itself expired it still grows with time.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token, ttl = ARGV[1], tonumber(ARGV[2])

local cur = redis.call('HMGET', KEYS[1], 't', 'c', 'f', 'x', 'h', 'l')
if cur[1] then
  local exp, delay = tonumber(cur[4]), tonumber(cur[6]) or 0
  if now < exp then
    if cur[1] ~= token then return {0, exp - now} end
    local count = tonumber(cur[2]) + 1
    local newexp = now + ttl
    local hold = tonumber(cur[5]) or 0
    if hold > 0 and newexp > hold then newexp = hold end
    redis.call('HSET', KEYS[1], 'c', count, 'x', string.format('%d', newexp))
    redis.call('PEXPIRE', KEYS[1], newexp - now + delay)
    return {2, tonumber(cur[3]), count, newexp - now}
  end
  if now < exp + delay then return {0, exp + delay - now} end
end

local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
if fence <= last then fence = last + 1 end
local fs = string.format('%d', fence)
redis.call('SET', KEYS[2], fs, 'PX', ARGV[6])

local hold = 0
if tonumber(ARGV[4]) > 0 then hold = now + tonumber(ARGV[4]) end
redis.call('HSET', KEYS[1], 't', token, 'c', 1, 'f', fs,
           'x', string.format('%d', now + ttl), 'd', ttl, 'o', ARGV[3],
           'h', string.format('%d', hold), 'l', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ttl + tonumber(ARGV[5]))
return {1, fence, 1, ttl}

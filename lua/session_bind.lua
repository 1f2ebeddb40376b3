#!lua flags=allow-oom,allow-cross-slot-keys
-- session_bind.lua: the session's side of a session-bound hold.  Redis
-- Cluster mode's acquire reads and binds here, in the session's own slot
-- (handlers/sessions_cluster.c; the hold itself is taken in its lock's
-- slot by acquire.lua, carrying the session's lease); in every mode, u
-- takes holds found gone off the session (handlers/sessions_fan.c).
--
-- KEYS     the session's hash
-- ARGV     1 op:
--            r  read: is it live, and for how long
--            b  bind: list hold ARGV 2 (its hash key) with token ARGV 3
--            u  unbind: ARGV 2, 3, 4, 5, ... pairs of hash key and token;
--               each pair's field goes when it still names that token
-- Returns  r  {1, ttl_left_ms, lock_delay_ms}
--          b  {1}
--          u  {fields removed}
--          r, b  {-1}  no such session (ended, expired)
--@include _clock.lua
local op = ARGV[1]
if op == 'u' then
  local n = 0
  for i = 2, #ARGV - 1, 2 do
    if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
      n = n + redis.call('HDEL', KEYS[1], ARGV[i])
    end
  end
  return {n}
end
local s = redis.call('HMGET', KEYS[1], 'e', 'd')
local e = tonumber(s[1] or '0')
-- At least 1 ms left: a hold is never given a lease that has already run out.
if e - 1 <= now then return {-1} end
if op == 'b' then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
  return {1}
end
return {1, e - now - 1, tonumber(s[2] or '0')}

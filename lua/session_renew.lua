-- session_renew.lua: move a session's end.  One key changes, whatever
-- number of holds the session carries: their liveness is read from it.
--
-- KEYS     the session's hash
-- ARGV     1 ttl_ms (0: the ttl it was started or last renewed with)
-- Returns  {1, ttl_ms, holds}   renewed
--          {-1}                 no such session (ended, expired)
--@include _clock.lua
local s = redis.call('HMGET', KEYS[1], 'e', 't', 'd')
if not s[1] or s[1] + 0 <= now then return {-1} end
local ttl = ARGV[1] + 0
if ttl == 0 then ttl = s[2] + 0 end
redis.call('HSET', KEYS[1], 'e', now + ttl + 1, 't', ttl)
redis.call('PEXPIRE', KEYS[1], ttl + 1 + s[3])
return {1, ttl, redis.call('HLEN', KEYS[1]) - 4}

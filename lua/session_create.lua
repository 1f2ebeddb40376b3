#!lua flags=allow-cross-slot-keys
-- session_create.lua: start a session (the layout: _holders.lua, sessions).
--
-- KEYS     the session's hash[, the liveness hash (_session.lua)]
-- ARGV     1 ttl_ms, 2 lock_delay_ms, 3 owner, 4 the creating API key's id
--          ('' without keys; kept as 'k', the session's owner: _session.lua)
-- Returns  {1, ttl_ms}   started
--          {-1}          a session with this token exists
--@include _layout.lua
--@include _clock.lua
--@include _session.lua
if redis.call('EXISTS', KEYS[1]) == 1 then return {-1} end
local ttl, delay = ARGV[1] + 0, ARGV[2] + 0
local e = now + ttl + 1
redis.call('HSET', KEYS[1], 'e', e, 't', ttl, 'd', delay, 'o', ARGV[3])
if LIVE_HASH then
  live_set(e, ttl)
  redis.call('HSET', KEYS[1], 'h', string.format('%d', e + SESSION_HORIZON_MS))
end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'k', ARGV[4]) end
redis.call('PEXPIRE', KEYS[1], ttl + 1 + delay)
return {1, ttl}

#!lua flags=allow-oom
-- session_renew.lua: move a session's end, and list the holds it carries.
-- Each hold carries the session's lease itself (_holders.lua, sessions) in
-- its own hash, which this script does not declare (it is known only once
-- the session is read; in Redis Cluster it lives in another slot): the
-- gateway then pushes the new end to the holds, one session_slot.lua call
-- per slot (per master group outside Cluster: handlers/sessions_fan.c).
--
-- KEYS     the session's hash
-- ARGV     1 ttl_ms (0: the ttl it was started or last renewed with),
--          2 the caller's key id ('': anyone's)
-- Returns  {1, ttl_ms, holds, kind:name, token, ...}  renewed (kind lock
--                               or sem; holds: how many it lists)
--          {-1}                 no such session (ended, expired)
--          {-2}                 another key's session (_session.lua)
--@include _layout.lua
--@include _clock.lua
--@include _session.lua
local s = redis.call('HMGET', KEYS[1], 'e', 't', 'd', 'k')
if not s[1] or s[1] + 0 <= now then return {-1} end
if not session_owned_by(s[4], ARGV[2]) then return {-2} end
local ttl = ARGV[1] + 0
if ttl == 0 then ttl = s[2] + 0 end
local e = now + ttl + 1
redis.call('HSET', KEYS[1], 'e', e, 't', ttl)
redis.call('PEXPIRE', KEYS[1], ttl + 1 + s[3])
local out = {1, ttl, 0}
append_session_holds(redis.call('HGETALL', KEYS[1]), out)
out[3] = (#out - 3) / 2
return out

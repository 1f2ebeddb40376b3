#!lua flags=allow-oom
-- session_renew.lua: move a session's end, and list the holds it carries
-- when the gateway must reach them (_holders.lua, "sessions").
--
-- Live holds (outside Redis Cluster: the liveness hash declared) end with
-- the session's liveness field, moved here: they are listed only for the
-- push of their hashes' horizon (session_slot.lua p), when that horizon
-- (field h) is less than SESSION_HORIZON_MS / 2 past the new end.
-- Carried holds (Redis Cluster) hold the session's end in their own
-- hashes, which this script cannot declare (known only once the session is
-- read; in another slot): every renewal lists them, and the gateway pushes
-- the new end, one session_slot.lua call per slot (handlers/sessions_fan.c).
--
-- KEYS     the session's hash[, the liveness hash (_session.lua)]
-- ARGV     1 ttl_ms (0: the ttl it was started or last renewed with),
--          2 the caller's key id ('': anyone's), 3 'q' or absent: quiet
--          (the gateway's own session for stream holds, which reports no
--          count): with the liveness hash, list only for a horizon push,
--          or when the session lists more than twice ARGV 4, the holds the
--          gateway knows it carries, plus 16 (released holds stay listed
--          until a push finds them gone: this bounds them)
-- Returns  {1, ttl_ms, holds, kind:name, token, ...}  renewed (kind lock
--                               or sem; holds: how many it lists)
--          {-1}                 no such session (ended, expired)
--          {-2}                 another key's session (_session.lua)
--@include _layout.lua
--@include _clock.lua
--@include _session.lua
local s = redis.call('HMGET', KEYS[1], 'e', 't', 'd', 'k', 'h')
if not s[1] or s[1] + 0 <= now then return {-1} end
if not session_owned_by(s[4], ARGV[2]) then return {-2} end
local ttl = ARGV[1] + 0
if ttl == 0 then ttl = s[2] + 0 end
local e = now + ttl + 1
redis.call('HSET', KEYS[1], 'e', e, 't', ttl)
redis.call('PEXPIRE', KEYS[1], ttl + 1 + s[3])
local list = true
if LIVE_HASH then
  live_set(e, ttl)
  local due = tonumber(s[5] or '0') < e + SESSION_HORIZON_MS / 2
  if due then redis.call('HSET', KEYS[1], 'h', string.format('%d', e + SESSION_HORIZON_MS)) end
  if ARGV[3] == 'q' and not due then
    -- Its fields: e t d o h, k when keyed, and one per listed hold.
    list = redis.call('HLEN', KEYS[1]) - 6 > 2 * tonumber(ARGV[4] or '0') + 16
  end
end
local out = {1, ttl, 0}
if list then append_session_holds(redis.call('HGETALL', KEYS[1]), out) end
out[3] = (#out - 3) / 2
return out

#!lua flags=allow-oom,allow-cross-slot-keys
-- session_renew.lua: move a session's end.  One key changes, whatever
-- number of holds the session carries: their liveness is read from it.
-- Once its end comes within half a horizon of the horizon (h,
-- SESSION_HORIZON_MS in _layout.lua), this renewal also pushes the horizon
-- and, by as much, the expiry of every hash the session holds, so those
-- outlive the session but not by more than a horizon.
--
-- Redis Cluster (ARGV 2 is 1): the holds' hashes live in other slots and
-- carry the session's lease themselves, so nothing here touches them and
-- there is no horizon; the answer lists them, and the gateway pushes the
-- new end to each slot (session_slot.lua, handlers/sessions_cluster.c).
--
-- KEYS     the session's hash
-- ARGV     1 ttl_ms (0: the ttl it was started or last renewed with),
--          2 cluster ('1', or absent)
-- Returns  {1, ttl_ms, holds}   renewed
--          {1, ttl_ms, holds, kind:name, token, ...}  renewed (cluster;
--                               kind lock or sem)
--          {-1}                 no such session (ended, expired)
--@include _layout.lua
--@include _clock.lua
--@include _session.lua
local s = redis.call('HMGET', KEYS[1], 'e', 't', 'd', 'h')
if not s[1] or s[1] + 0 <= now then return {-1} end
local ttl = ARGV[1] + 0
if ttl == 0 then ttl = s[2] + 0 end
local e = now + ttl + 1
redis.call('HSET', KEYS[1], 'e', e, 't', ttl)
redis.call('PEXPIRE', KEYS[1], ttl + 1 + s[3])
local hz = tonumber(s[4] or '0')
if hz == 0 then hz = s[1] + SESSION_HORIZON_MS end
-- e, t, d, o and h are the session's own fields; the rest are its holds.
local holds = redis.call('HLEN', KEYS[1]) - (s[4] and 5 or 4)
if ARGV[2] == '1' then
  local out = {1, ttl, holds}
  local flat = redis.call('HGETALL', KEYS[1])
  append_session_holds(flat, out)
  return out
end
if e + SESSION_HORIZON_MS / 2 > hz then
  local shift = e + SESSION_HORIZON_MS - hz
  redis.call('HSET', KEYS[1], 'h', hz + shift)
  for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
    if #f > 1 then
      local left = redis.call('PTTL', f)
      if left >= 0 then redis.call('PEXPIRE', f, left + shift) end
    end
  end
end
return {1, ttl, holds}

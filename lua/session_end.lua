#!lua flags=allow-oom
-- session_end.lua: end a session, and list the holds it carries.  A
-- session ended this way brings no lock-delay: that is for sessions that
-- expire.  The holds' hashes are not declared here (known only once the
-- session is read; in Redis Cluster they live in other slots): the gateway
-- then releases them, all levels, one session_slot.lua call per slot (per
-- master group outside Cluster: handlers/sessions_fan.c), waking their
-- waiters.
-- Its liveness field (outside Redis Cluster, _session.lua) is left as it
-- is: the gateway releases its live holds next, each counted, and one it
-- could not reach ends at the session's end, as a carried hold would
-- (lua/liveness.lua drops the field later).
--
-- KEYS     the session's hash
-- ARGV     1 the caller's key id ('': anyone's)
-- Returns  {1, 0, kind:name, token, ...}  ended; its holds listed
--          {-1}  no such session (ended, expired)
--          {-2}  another key's session (_session.lua): nothing changes
--@include _clock.lua
--@include _session.lua
local flat = redis.call('HGETALL', KEYS[1])
local e, k = 0, nil
for i = 1, #flat, 2 do
  if flat[i] == 'e' then e = flat[i + 1] + 0
  elseif flat[i] == 'k' then k = flat[i + 1] end
end
if e <= now then return {-1} end
if not session_owned_by(k, ARGV[1]) then return {-2} end
redis.call('DEL', KEYS[1])
local out = {1, 0}
append_session_holds(flat, out)
return out

#!lua flags=allow-oom,allow-cross-slot-keys
-- session_end.lua: end a session and release every hold it carries (all
-- levels of re-entry), waking their waiters.  A session ended this way
-- brings no lock-delay: that is for sessions that expire.
--
-- KEYS     the session's hash
-- ARGV     1 channel, 2 cluster ('1', or absent)
-- Returns  {1, holds released}
--          {1, 0, kind:name, token, ...}  (cluster) ended; the holds are
--                                         listed, not released
--          {-1}  no such session (ended, expired)
-- The holds' hashes are not in KEYS: they are the session's own fields,
-- known only once it is read.  On one master (single, Sentinel) and in
-- quorum mode (every master has its own copy of every key) they are local.
-- In Redis Cluster they are in other slots: the session ends here and the
-- gateway releases its holds, one session_slot.lua call per slot
-- (handlers/sessions_cluster.c).
--@include _layout.lua
--@include _clock.lua
--@include _session.lua
--@include _holders.lua
local flat = redis.call('HGETALL', KEYS[1])
local e = 0
local holds = {}
for i = 1, #flat, 2 do
  if flat[i] == 'e' then e = flat[i + 1] + 0
  elseif #flat[i] > 1 then holds[#holds + 1] = flat[i] end
end
if e <= now then return {-1} end
if ARGV[2] == '1' then
  redis.call('DEL', KEYS[1])
  local out = {1, 0}
  append_session_holds(flat, out)
  return out
end
-- Gone first: load() then finds the session's holders dead, drops their
-- fields and ends x's record, with no lock-delay (the session has none left).
redis.call('DEL', KEYS[1])
session_cache = {}
live_channel = ARGV[1]
local released = 0
for _, hkey in ipairs(holds) do
  local st = load(hkey)
  save_ttl(hkey, st) -- announces the holds ended (_holders.lua, THE RULE)
  released = released + 1
end
return {1, released}

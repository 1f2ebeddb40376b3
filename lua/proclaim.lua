#!lua flags=allow-oom,allow-cross-slot-keys
-- proclaim.lua: an election's leader changes its value (PATCH
-- /v1/elections/{name}, handlers/elections.c).  An election is an
-- exclusive lock whose holder's owner is the leader's value; this writes
-- the owner of the holder with this token, and announces the change to
-- the name's watchers (observers) when it is watched (v), as a change of
-- holder is (_holders.lua, THE RULE), and appends it to the name's change
-- log when an event stream reads it (lg).  The lease is left as it is.
--
-- KEYS     hash
-- ARGV     1 token, 2 value, 3 the name's release channel (in Redis Cluster
--          mode its slot's shard channel, which the script cannot derive and
--          the only one gateways listen on there)
-- Returns  {1, fence}  the value is set; fence is the leader's term
--          {-1}        nobody holds it (no leader, or its term ended)
--          {-2}        held, but not by this token
--@include _layout.lua
--@include _clock.lua
--@include _holders.lua
live_channel = ARGV[3]
local st = load(KEYS[1])
local me, why = holder_of(st, ARGV[1])
if not me then return {why} end
me.owner = ARGV[2]
put(KEYS[1], st, ARGV[1], me, st.mode)
if st.v > now then announce(KEYS[1]) end
if st.lg > now then log_change(KEYS[1], st) end
save_ttl(KEYS[1], st)
return {1, me.fence}

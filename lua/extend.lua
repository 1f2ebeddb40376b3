#!lua flags=allow-oom,allow-cross-slot-keys
-- extend.lua: extend one holder's lease.  (The layout: _holders.lua.)
--
-- KEYS     hash
-- ARGV     1 token, 2 ttl_ms (0: the ttl it was taken with)
-- Returns  {1, fence, count, ttl_ms, kind(1 x, 2 s, 3 p), limit}  extended;
--                     ttl_ms is the new remaining lease, capped by max-hold
--          {-1}       nobody holds it
--          {-2}       held, but not by this token
--          {-5}       a session-bound hold: its session is what gets extended
--@include _layout.lua
--@include _clock.lua
--@include _holders.lua
local st = load(KEYS[1])
local me, why = holder_of(st, ARGV[1])
if not me then return {why} end
if me.session then return {-5} end
local ttl = tonumber(ARGV[2])
if ttl == 0 then ttl = me.ttl end
me.exp = cap_exp(me, ttl)
put(KEYS[1], st, ARGV[1], me, st.mode)
save_ttl(KEYS[1], st)
return {1, me.fence, me.count, remaining(me.exp), kind_code[st.mode], st.limit}

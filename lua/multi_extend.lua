#!lua flags=allow-oom,allow-cross-slot-keys
-- multi_extend.lua: extend several holds of one token, all or none.
-- (The layout: _holders.lua.)
--
-- KEYS     the names' hashes, then outside Redis Cluster the liveness
--          hash (_holders.lua, name_keys)
-- ARGV     1 token, 2 ttl_ms (0: each hold's own ttl)
-- Returns  {1, ttl_ms, fence_1, fence_2, ...}  extended; ttl_ms the
--                          shortest new remaining lease
--          {-1, i}         nobody holds name i: nothing was extended
--          {-2, i}         name i is held, but not by this token
--          {-5, i}         name i is bound to a session: extend that
--@include _layout.lua
--@include _clock.lua
--@include _holders.lua
local token = ARGV[1]
local sts, n = {}, name_keys()
for i = 1, n do
  local st = load(KEYS[i])
  local me, why = holder_of(st, token)
  if not me then return {why, i} end
  if me.session then return {-5, i} end
  sts[i] = st
end
local out = {1, -1}
for i = 1, n do
  local st = sts[i]
  local me = st.holders[token]
  local ttl = ARGV[2] + 0
  if ttl == 0 then ttl = me.ttl end
  me.exp = cap_exp(me, ttl)
  put(KEYS[i], st, token, me, st.mode)
  save_ttl(KEYS[i], st)
  local left = remaining(me.exp)
  if out[2] < 0 or left < out[2] then out[2] = left end
  out[#out + 1] = me.fence
end
return out

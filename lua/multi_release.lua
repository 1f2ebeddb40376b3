#!lua flags=allow-oom,allow-cross-slot-keys
-- multi_release.lua: release several holds of one token, all or none: one
-- level of re-entry each, as release.lua.  (The layout: _holders.lua.)
--
-- KEYS     the names' hashes, then outside Redis Cluster the liveness
--          hash (_holders.lua, name_keys)
-- ARGV     1 token, 2 channel[, 3 attempt: release only the levels the
--          request attempt ARGV 3 took (multi_acquire.lua ARGV 10), once;
--          else {-1, i}: the gateway giving back or undoing that attempt]
-- Returns  {1, released}   released: how many holds ended (count 0)
--          {-1, i}         nobody holds name i: nothing was released
--          {-2, i}         name i is held, but not by this token
--@include _layout.lua
--@include _clock.lua
--@include _holders.lua
local token = ARGV[1]
live_channel = ARGV[2]
local sts, n = {}, name_keys()
for i = 1, n do
  local st = load(KEYS[i])
  local me, why = holder_of(st, token)
  if not me then return {why, i} end
  if ARGV[3] and not (me.attempt and string.sub(me.attempt, 1, -2) == ARGV[3]) then
    return {-1, i}
  end
  sts[i] = st
end
local ended = 0
for i = 1, n do
  local st, hk = sts[i], KEYS[i]
  local me = st.holders[token]
  if ARGV[3] then me.attempt = nil end
  me.count = me.count - 1
  if me.count > 0 and st.mode ~= 'p' then
    put(hk, st, token, me, st.mode)
  else
    ended = ended + 1
    st.holders[token] = nil
    st.alive = st.alive - 1
    if me.legacy then redis.call('HDEL', session_key(hk, me.session), hk) end
    local gone = token
    if token == st.xtoken then
      redis.call('HSET', hk, 'x', struct.pack(X_HEAD, '', 0, me.fence, 0, 0))
      st.xtoken, gone = nil, nil
    end
    save_ttl(hk, st, gone) -- announces it (_holders.lua, THE RULE)
  end
end
return {1, ended}

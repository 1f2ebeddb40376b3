#!lua flags=allow-oom,allow-cross-slot-keys
-- session_slot.lua: act on a session's holds, their hashes declared
-- (handlers/sessions_fan.c: in Redis Cluster mode once per slot the
-- session's holds use, all slots at once; in the other modes once per
-- hundred holds, on every master in quorum mode).  Each hold carries the
-- session's lease itself (_holders.lua, sessions).
--
-- KEYS     the holds' hashes (in Redis Cluster, all in one slot), then
--          outside Redis Cluster the liveness hash (_holders.lua, name_keys)
-- ARGV     1 op:
--            p  push: each carried hold's lease ends ARGV 2 ms from now (a
--               renewal); a live hold's hash lasts its horizon past it
--            r  release: each hold ends, all levels, without lock-delay,
--               and its waiters are woken on channel ARGV 2 (the session
--               ended by DELETE)
--            c  check: only say which are held
--          2 ttl_ms (p) or the slot's release channel (r), '' for c
--          3 the session's token
--          4, 5, ...  the token of each key's hold, in KEYS order
-- Returns  {holds acted on, i, j, ...}  i, j: 1-based indexes of the keys
--          that no hold of this session holds (released, or expired): the
--          gateway takes them off the session's list
--@include _layout.lua
--@include _clock.lua
--@include _holders.lua
local op, arg, session = ARGV[1], ARGV[2], ARGV[3]
local out = {0}
if op == 'r' then live_channel = arg end
for i = 1, name_keys() do
  local key, token = KEYS[i], ARGV[3 + i]
  local st = load(key)
  local me = st.holders[token]
  if not me or me.session ~= session then
    out[#out + 1] = i
    save_ttl(key, st)
  else
    out[1] = out[1] + 1
    if op == 'p' and me.live then
      -- Its lease is its session's liveness field: only its hash's
      -- horizon is pushed (save_ttl).
      save_ttl(key, st)
    elseif op == 'p' then
      me.exp = now + tonumber(arg) + 1
      put(key, st, token, me, st.mode)
      save_ttl(key, st)
    elseif op == 'r' then
      st.holders[token] = nil
      st.alive = st.alive - 1
      local gone = token
      if token == st.xtoken then
        -- x's record stays, ended, as the fence's carrier (release.lua).
        redis.call('HSET', key, 'x', struct.pack(X_HEAD, '', 0, me.fence, 0, 0))
        st.xtoken, gone = nil, nil
      end
      save_ttl(key, st, gone) -- announces it (_holders.lua, THE RULE)
    end
  end
end
return out

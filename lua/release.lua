#!lua flags=allow-oom,allow-cross-slot-keys
-- release.lua: release one level of a holder's re-entry (a permit: all of
-- it).  (The layout: _holders.lua.)
--
-- KEYS     hash
-- ARGV     1 token, 2 channel, 3 message[, 4 attempt: release only the
--          level the request attempt ARGV 4 took (acquire.lua ARGV 15), and
--          only once; else {-1}: the gateway undoing an attempt whose outcome
--          it did not learn (handlers/undo.h)]
-- Returns  1                               the fast path: {1, 0, 0}
--          {1, count_left, holders_left}   released; count_left 0: this
--                                          token's hold ended
--          {-1}                            nobody holds it
--          {-2}                            held, but not by this token
-- A release ends a hold without lock-delay, and is announced on channel
-- ARGV 2 (save_ttl: _holders.lua, THE RULE) so gateways wake one waiter
-- (and every watcher) at once.  ARGV 3 is the message derived from KEYS.
--@include _layout.lua
local flat = redis.call('HGETALL', KEYS[1])

-- Fast path: the exclusive holder releases and nobody waits (the hash holds
-- only x).  Its record is rewritten in place with an empty token, lease end
-- 0 and no lock-delay, keeping the fence: four Redis calls (HGETALL, PTTL,
-- HSET, PUBSUB NUMPAT) and a bare integer for an
-- answer.
-- Whether the lease is still running is read from the hash's expiry, not
-- from TIME: while the hash holds only x and x's hold runs, every writer
-- (acquire's fast path, save_ttl) has set that expiry to exactly the lease
-- end + its lock-delay + FENCE_KEEP_MS, and PTTL costs Redis about half of
-- TIME and turning its answer into milliseconds.  The expiry already lies
-- FENCE_KEEP_MS past the lease; it is only brought nearer when it is more
-- than LINGER_MS away.
if #flat == 2 and flat[1] == 'x' and not ARGV[4] then
  local v = flat[2]
  local tok, count, fence, exp, ttl, pos = struct.unpack(X_HEAD, v)
  -- A record from before carried session leases (exp SESSION_EXP) has no
  -- such expiry: the general path reads its session and takes it off it.
  if tok == ARGV[1] and exp > 0 and exp < SESSION_EXP then
    local delay = 0
    if pos <= #v then delay = select(2, struct.unpack('<I6I4', v, pos)) end
    local left = redis.call('PTTL', KEYS[1]) - FENCE_KEEP_MS - delay
    if left > 0 then
      if count > 1 then
        redis.call('HSET', KEYS[1], 'x', struct.pack(X_HEAD, tok, count - 1, fence, exp, ttl) ..
                   string.sub(v, pos))
        return {1, count - 1, 1}
      end
      redis.call('HSET', KEYS[1], 'x', struct.pack(X_HEAD, '', 0, fence, 0, 0))
      if left + delay > LINGER_MS then redis.call('PEXPIRE', KEYS[1], FENCE_KEEP_MS) end
      -- A change of holder, published for prefix streams while some client
      -- has a pattern (_holders.lua, "prefix streams": nobody holds it now).
      if redis.call('PUBSUB', 'NUMPAT') > 0 then
        local t = redis.call('TIME')
        publish_change(KEYS[1], t[1] .. string.format('%06d', tonumber(t[2])) ..
                       '-1\0released\0' .. '0\0' .. '0\0' .. '0\0' .. '0\0' .. '0\0' ..
                       '0\0' .. '0\0' .. '0\0\0\0' .. '0')
      end
      return 1
    end
  end
end

--@include _clock.lua
--@include _holders.lua
live_channel = ARGV[2]
local st = load(KEYS[1], flat)
local me, why = holder_of(st, ARGV[1])
if not me then return {why} end
if ARGV[4] then
  if not me.attempt or string.sub(me.attempt, 1, -2) ~= ARGV[4] then return {-1} end
  me.attempt = nil
end
me.count = me.count - 1
if me.count > 0 and st.mode ~= 'p' then
  put(KEYS[1], st, ARGV[1], me, st.mode)
  return {1, me.count, st.alive}
end
st.holders[ARGV[1]] = nil
st.alive = st.alive - 1
-- A record from before carried leases: its session no longer lists it
-- (a carried one stays listed until a renewal or read finds it gone).
if me.legacy then redis.call('HDEL', session_key(KEYS[1], me.session), KEYS[1]) end
local gone = ARGV[1]
if ARGV[1] == st.xtoken then
  -- x's record stays, ended, as the fence's carrier.
  redis.call('HSET', KEYS[1], 'x', struct.pack(X_HEAD, '', 0, me.fence, 0, 0))
  st.xtoken, gone = nil, nil
end
save_ttl(KEYS[1], st, gone)
return {1, 0, st.alive}

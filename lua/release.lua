-- release.lua: release one level of a holder's re-entry (a permit: all of
-- it).  (The layout: _holders.lua.)
--
-- KEYS     hash
-- ARGV     1 token, 2 channel, 3 message
-- Returns  {1, count_left, holders_left}   released; count_left 0: this
--                                          token's hold ended
--          {-1}                            nobody holds it
--          {-2}                            held, but not by this token
-- A release ends a hold without lock-delay.  When a waiter may be waiting
-- (w), the message is published so gateways wake one waiter at once.
local st = load(KEYS[1])
local me, why = holder_of(st, ARGV[1])
if not me then return {why} end
me.count = me.count - 1
if me.count > 0 and st.mode ~= 'p' then
  redis.call('HSET', KEYS[1], ARGV[1], encode(me))
  return {1, me.count, st.alive}
end
st.holders[ARGV[1]] = nil
st.alive = st.alive - 1
save_ttl(KEYS[1], st, ARGV[1])
if st.w > now then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return {1, 0, st.alive}

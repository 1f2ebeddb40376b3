#!lua flags=allow-oom,allow-cross-slot-keys
-- force.lua: end every hold on a lock or semaphore, whatever the token
-- (DELETE ...?force=true, an operator's act).  (Layout: _holders.lua.)
--
-- KEYS     hash
-- ARGV     1 channel, 2 message
-- Returns  {1, holders_ended, fence, key id, token, ...}  fence: the
--          highest a holder had; then each ended hold's API key id and
--          token, for holds taken with a key (its holds_at_once ledger:
--          handlers/quota_holds.h)
--          {-1}                       nobody holds it
-- Fences stay intact: x's record keeps its fence and f keeps the last one
-- (save_ttl), so the next holder gets a higher fence.  The ended tokens
-- are kept in the hash (fields !<token>, _holders.lua) until their leases
-- would have ended, so their
-- holders' extend and release answer "not held" (holder_of) even after
-- somebody else took the name.  No lock-delay applies.  Waiters and
-- watchers are woken at once (save_ttl: _holders.lua, THE RULE); ARGV 2 is
-- the message derived from KEYS.
--@include _layout.lua
--@include _clock.lua
--@include _holders.lua
live_channel = ARGV[1]
local st = load(KEYS[1])
if st.alive == 0 then
  save_ttl(KEYS[1], st)
  return {-1}
end
local ended, gone, keyed = 0, {}, {}
for token, h in pairs(st.holders) do
  ended = ended + 1
  if h.key_id and h.key_id ~= '' then
    keyed[#keyed + 1], keyed[#keyed + 2] = h.key_id, token
  end
  -- Until its lease would have ended (a session-bound hold's: its
  -- session's end as load() read it).
  redis.call('HSET', KEYS[1], '!' .. token, int(h.exp))
  if h.exp > st.foexp then st.foexp = h.exp end
  -- Its session no longer carries it (as release.lua does).
  if h.legacy then redis.call('HDEL', session_key(KEYS[1], h.session), KEYS[1]) end
  if token == st.xtoken then
    redis.call('HSET', KEYS[1], 'x', struct.pack(X_HEAD, '', 0, h.fence, 0, 0))
    st.xtoken = nil
  else
    gone[#gone + 1] = token
  end
end
if #gone > 0 then redis.call('HDEL', KEYS[1], unpack(gone)) end
local fence = st.maxfence -- 0 for a semaphore (load())
st.holders, st.alive = {}, 0
st.loud = true -- announced even with nobody waiting or watching (_holders.lua)
save_ttl(KEYS[1], st)
local out = {1, ended, fence}
for i = 1, #keyed do out[#out + 1] = keyed[i] end
return out

-- watch.lua: inspect.lua for a watcher (GET ?watch_ms=&after=): who holds
-- it, and, when that is still what the watcher last saw, a mark that makes
-- the name's changes announce themselves.  (Layout: _holders.lua.)
--
-- KEYS     hash
-- ARGV     1 after: the index the watcher saw (index_of in _holders.lua:
--          the sum of the live holders' fences; 0 for nobody),
--          2 watch_left_ms
-- Returns  inspect.lua's answer.  When its index equals after, v is raised
--          to now + watch_left_ms first: every change of holder is then
--          announced (_holders.lua, THE RULE), and the watcher, parked on
--          it, is woken.  An expiry is announced only once a script finds
--          it: the watcher's timer is set to the lease's end.
--@include _layout.lua
--@include _clock.lua
--@include _holders.lua
local st = load(KEYS[1])
local index = index_of(st)
if index == tonumber(ARGV[1]) then
  local until_ms = now + tonumber(ARGV[2])
  if until_ms > st.v then
    st.v = until_ms
    redis.call('HSET', KEYS[1], 'v', int(until_ms))
  end
end
save_ttl(KEYS[1], st)
if st.alive == 0 then return {-1} end
local first = st.holders[st.first]
return {1, st.alive, first.count, st.maxfence, remaining(st.maxexp), first.owner,
        kind_code[st.mode], st.limit, first.key_id or '', index}

-- inspect.lua: who holds it, never revealing a token.  (Layout: _holders.lua.)
--
-- KEYS     hash
-- Returns  {1, holders, count, fence, ttl_ms, owner, kind(1 x, 2 s, 3 p), limit,
--           key_id, index}
--          fence is the highest, ttl_ms the longest remaining lease, count
--          and owner those of the longest-held holder (lowest fence), index
--          the watch index (index_of: the holder's fence when one holds it)
--          {-1}  nobody holds it
--@include _layout.lua
--@include _clock.lua
--@include _holders.lua
local st = load(KEYS[1])
-- A lease found ended is a change like any (announced, logged, published
-- for prefix streams: _holders.lua), also while others still hold it.
if st.alive == 0 or st.freed then save_ttl(KEYS[1], st) end
if st.alive == 0 then return {-1} end
local first = st.holders[st.first]
return {1, st.alive, first.count, st.maxfence, remaining(st.maxexp), first.owner,
        kind_code[st.mode], st.limit, first.key_id or '', index_of(st)}

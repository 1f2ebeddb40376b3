-- _index.lua -- the watch index, included (--@include) after _holders.lua
-- by inspect.lua and watch.lua only, so that the scripts on the hot paths
-- do not make its closure on every call.

-- The name's index for watchers (GET ?watch_ms=&after=, watch.lua): the sum
-- of its live holders' fence fields (a permit's: its grant time in
-- microseconds), modulo 2^52 so that it stays an exact integer; 0 when
-- nobody holds it.  One holder's index is its fence.  Fences only grow and
-- each is given once, so any change of holders (one more, one fewer, one
-- forced out and another in) changes the sum.
local INDEX_MOD = 4503599627370496 -- 2^52
local function index_of(st)
  local sum = 0
  for _, h in pairs(st.holders) do
    local f = h.fence
    if f == 0 then f = 1 end -- a permit from before permits kept their grant time
    sum = (sum + f % INDEX_MOD) % INDEX_MOD
  end
  return sum
end

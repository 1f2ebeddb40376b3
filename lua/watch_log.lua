-- watch_log.lua: an event stream's read of a name's change log
-- (handlers/state_stream.c: watch streams, election observers).
-- (Layout and the log: _holders.lua, "the change log".)
--
-- KEYS     hash
-- ARGV     1 after: the id of the last entry the stream sent ('' none yet),
--          2 mark_ms: how long the stream may read before it calls again,
--          3 max: the most entries to return
-- Marks the name as watched and logged (v, lg) for mark_ms, so that every
-- change of holder is announced and logged by the script that makes it.
-- An expiry is logged once a script finds it: this one, called by the
-- stream's timer at the lease's end, or any other.  When the log's last
-- entry is not the state found (the log was empty, or changes were made
-- while nothing was logged), the state is appended, marked u.
-- Returns  {contiguous, ttl_left, entry...}: ttl_left the longest lease's
--          remaining time now (-1: nobody holds it), for the stream's timer;
--          each entry {id, u, state}, state in inspect.lua's shape ({1,
--          holders, count, fence, ttl_ms, owner, kind, limit, key_id,
--          index} or {-1}).
--          after '': the last entry only.  Otherwise the entries after
--          after, up to max, contiguous 1 when after is in the log;
--          contiguous 0 (the log no longer reaches back to it, or never
--          had it): the last entry only.
--@include _layout.lua
--@include _clock.lua
--@include _holders.lua
local hash, after, max = KEYS[1], ARGV[1], tonumber(ARGV[3])
local st = load(hash)
local until_ = now + tonumber(ARGV[2])
local set = {}
if until_ > st.v then st.v, set[#set + 1], set[#set + 2] = until_, 'v', int(until_) end
if until_ > st.lg then st.lg, set[#set + 1], set[#set + 2] = until_, 'lg', int(until_) end
if #set > 0 then redis.call('HSET', hash, unpack(set)) end
save_ttl(hash, st) -- logs an expiry load() found

-- An entry's fields (log_change's order).
local function split(v)
  local f = {}
  for part in string.gmatch(v .. '\0', '([^%z]*)%z') do f[#f + 1] = part end
  return f
end

local last = st.lq > 0 and redis.call('HGET', hash, 'l' .. st.lq)
local lf = last and split(last)
local want = st.alive > 0 and index_of(st) or 0
if not lf or tonumber(lf[2]) ~= st.alive or tonumber(lf[8]) ~= want then
  log_change(hash, st, true)
  save_ttl(hash, st)
  lf = split(redis.call('HGET', hash, 'l' .. st.lq))
end

local function entry(n, f)
  local state = {-1}
  if tonumber(f[2]) > 0 then
    state = {1, tonumber(f[2]), tonumber(f[3]), tonumber(f[4]), tonumber(f[5]), f[9],
             tonumber(f[6]), tonumber(f[7]), f[10], tonumber(f[8])}
  end
  return {int(st.le) .. '-' .. n, tonumber(f[1]), state}
end

local left = st.alive > 0 and remaining(st.maxexp) or -1
local le, n = string.match(after, '^(%d+)-(%d+)$')
le, n = tonumber(le or '-1'), tonumber(n or '-1')
if after == '' then return {1, left, entry(st.lq, lf)} end
-- after is in the log: this log's (le), not past its end, and the entry
-- after it kept (or it is the last).
if le ~= st.le or n > st.lq or n < st.lq - LOG_KEEP then
  return {0, left, entry(st.lq, lf)}
end
local out = {1, left}
if n == st.lq then return out end
local upto = math.min(st.lq, n + max)
local want_f = {}
for i = n + 1, upto do want_f[#want_f + 1] = 'l' .. i end
local vals = redis.call('HMGET', hash, unpack(want_f))
for i, v in ipairs(vals) do
  if not v then return {0, left, entry(st.lq, lf)} end
  out[#out + 1] = entry(n + i, split(v))
end
return out

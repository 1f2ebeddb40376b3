-- watch_log.lua: an event stream's read of a name's change log
-- (handlers/state_stream.c: watch streams, election observers).
-- (Layout and the log: _holders.lua.)
--
-- KEYS     1 hash, 2 its change log (<hash>:log)
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
--          each entry {id, u, state}, state in
--          inspect.lua's shape ({1, holders, count, fence, ttl_ms, owner,
--          kind, limit, key_id, index} or {-1}).
--          after '': the last entry only.  Otherwise the entries after
--          after, up to max, contiguous 1 when after is still in the log;
--          contiguous 0 (the log no longer reaches back to it, or never
--          had it): the last entry only.
--@include _layout.lua
--@include _clock.lua
--@include _holders.lua
prefix_ok = true -- never called in Redis Cluster mode (501)
local hash, log, after, max = KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[3])
local st = load(hash)
local until_ = now + tonumber(ARGV[2])
local set = {}
if until_ > st.v then st.v, set[#set + 1], set[#set + 2] = until_, 'v', int(until_) end
if until_ > st.lg then st.lg, set[#set + 1], set[#set + 2] = until_, 'lg', int(until_) end
if #set > 0 then redis.call('HSET', hash, unpack(set)) end
save_ttl(hash, st) -- logs an expiry load() found
local function fields(flat)
  local t = {}
  for i = 1, #flat, 2 do t[flat[i]] = flat[i + 1] end
  return t
end
local last = redis.call('XREVRANGE', log, '+', '-', 'COUNT', 1)[1]
local want = st.alive > 0 and index_of(st) or 0
local lf = last and fields(last[2])
if not last or tonumber(lf.a) ~= st.alive or tonumber(lf.i or '0') ~= want then
  local id = log_change(hash .. ':log', st, true)
  last = redis.call('XRANGE', log, id, id)[1]
  lf = fields(last[2])
end
redis.call('PEXPIRE', log, tonumber(ARGV[2]) + 1000)

local function entry(e, f)
  f = f or fields(e[2])
  local state = {-1}
  if tonumber(f.a) > 0 then
    state = {1, tonumber(f.a), tonumber(f.c), tonumber(f.f), tonumber(f.t), f.o,
             tonumber(f.k), tonumber(f.l), f.y, tonumber(f.i)}
  end
  return {e[1], tonumber(f.u or '0'), state}
end

local left = st.alive > 0 and remaining(st.maxexp) or -1
if after == '' then return {1, left, entry(last, lf)} end
local es = redis.call('XRANGE', log, after, '+', 'COUNT', max + 1)
if not es[1] or es[1][1] ~= after then return {0, left, entry(last, lf)} end
local out = {1, left}
for i = 2, #es do out[#out + 1] = entry(es[i]) end
return out

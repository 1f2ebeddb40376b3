-- watch_prefix.lua: a prefix stream's read of its prefix's change log
-- (GET /v1/locks?prefix= or /v1/semaphores?prefix= as an event stream,
-- handlers/state_stream.c).  (The marks and the log: _holders.lua,
-- "prefix streams".)  Never called in Redis Cluster mode.
--
-- KEYS     1 <prefix>pw, 2 the prefix's log <prefix>plog:KIND:PREFIX,
--          3... hashes of names the stream saw held whose lease may have
--          ended: each is read, so that an expiry is logged (and, like any
--          change, announced)
-- ARGV     1 the mark, "KIND:PREFIX", 2 after: the id of the last entry
--          the stream has ('' none yet), 3 mark_ms, 4 max entries
-- Returns  {contiguous, -1, entry...}, each entry {id, u, state, name}
--          (state in inspect.lua's shape) or {id, 2}: a place in the log
--          that is no change (the log's start).  after '': the log's last
--          entry as a place only.  contiguous 0: after is not in the log
--          (any more): the last entry as a place only.
--@include _layout.lua
--@include _clock.lua
--@include _holders.lua
prefix_ok = true
local pw, plog, mark_f, after = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local mark, max = tonumber(ARGV[3]), tonumber(ARGV[4])
local until_ = now + mark
local marks = redis.call('HGETALL', pw)
local stale = {}
local mine = 0
for i = 1, #marks, 2 do
  local u = tonumber(marks[i + 1])
  if marks[i] == mark_f then mine = u elseif u <= now then stale[#stale + 1] = marks[i] end
end
if #stale > 0 then redis.call('HDEL', pw, unpack(stale)) end
if until_ > mine then redis.call('HSET', pw, mark_f, int(until_)) end
if redis.call('PTTL', pw) < mark + 1000 then redis.call('PEXPIRE', pw, mark + 1000) end
for i = 3, #KEYS do
  save_ttl(KEYS[i], load(KEYS[i])) -- an ended lease found is logged
end
local last = redis.call('XREVRANGE', plog, '+', '-', 'COUNT', 1)[1]
if not last then
  last = {redis.call('XADD', plog, 'MAXLEN', '~', PREFIX_KEEP, '*', 'm', 1)}
end
redis.call('PEXPIRE', plog, mark + 1000)
if after == '' then return {1, -1, {last[1], 2}} end
local es = redis.call('XRANGE', plog, after, '+', 'COUNT', max + 1)
if not es[1] or es[1][1] ~= after then return {0, -1, {last[1], 2}} end
local out = {1, -1}
for i = 2, #es do
  local f = {}
  local flat = es[i][2]
  for j = 1, #flat, 2 do f[flat[j]] = flat[j + 1] end
  if f.m then
    out[#out + 1] = {es[i][1], 2}
  else
    local state = {-1}
    if tonumber(f.a) > 0 then
      state = {1, tonumber(f.a), tonumber(f.c), tonumber(f.f), tonumber(f.t), f.o,
               tonumber(f.k), tonumber(f.l), f.y, tonumber(f.i)}
    end
    out[#out + 1] = {es[i][1], 0, state, f.n}
  end
end
return out

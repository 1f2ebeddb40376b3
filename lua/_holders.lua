-- _holders.lua -- prepended to acquire, extend, release, inspect and
-- dequeue at build time (the Makefile), so the layout below is written once.
--
-- One hash per lock or semaphore (KEYS[1]):
--   m     kind of the current holders: x exclusive, s shared, p permit
--   lim   a semaphore's limit, as its holders use it
--   dl    lock-delay: nobody may acquire before this time (ms)
--   w     some waiter may wait until this time (ms): releases publish
--   f     the name's last fence; the hash is kept FENCE_KEEP_MS after its
--         last use for it, so fences grow even when Redis's clock steps back
--         by less than that (a fence is also at least the clock in us)
--   <token>  one field per holder (tokens are 22+ characters, meta fields
--         are short): "count:fence:lease_end:ttl:max_hold_end:delay:owner"
-- Its PEXPIRE covers the longest lease plus its lock-delay, so Redis drops
-- an abandoned lock by itself.  All times come from Redis's clock.

local FENCE_KEEP_MS = 10000

local T = redis.call('TIME')
local now = tonumber(T[1]) * 1000 + math.floor(tonumber(T[2]) / 1000)
local now_us = tonumber(T[1]) * 1000000 + tonumber(T[2])

-- Numbers become strings by concatenation (cheaper than string.format in
-- Redis's Lua) where Lua's own conversion is exact: integers below 10^14,
-- i.e. every time in ms.  Fences are microseconds (16 digits): a holder
-- keeps its fence as the string it was read or made as (h.fs).
local function int(n) return string.format('%d', n) end

-- The clock in microseconds, as a string: the fence of an uncontended
-- acquire, made without string.format.
local function now_us_str()
  return T[1] .. string.sub('000000', #T[2] + 1) .. T[2]
end

local function encode(h)
  return h.count .. ':' .. h.fs .. ':' .. h.exp .. ':' .. h.ttl .. ':' .. h.hold ..
         ':' .. h.delay .. ':' .. h.owner
end

-- Reads the hash, drops holders whose lease ended (turning their lock-delay
-- into dl), and sums up who is left.
local function load(key)
  local st = {holders = {}, alive = 0, maxexp = 0, minexp = 0, dl = 0, w = 0,
              mode = nil, limit = 0, first = nil, lastfence = 0}
  local flat = redis.call('HGETALL', key)
  local dead = {}
  for i = 1, #flat, 2 do
    local f, v = flat[i], flat[i + 1]
    if #f >= 22 then
      local c, fe, x, d, h, l, o =
        string.match(v, '^(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(.*)$')
      local hd = {count = tonumber(c), fence = tonumber(fe), fs = fe, exp = tonumber(x),
                  ttl = tonumber(d), hold = tonumber(h), delay = tonumber(l), owner = o}
      if hd.exp <= now then
        dead[#dead + 1] = f
        if hd.delay > 0 and hd.exp + hd.delay > st.dl then st.dl = hd.exp + hd.delay end
      else
        st.holders[f] = hd
        st.alive = st.alive + 1
        if hd.exp > st.maxexp then st.maxexp = hd.exp end
        if st.minexp == 0 or hd.exp < st.minexp then st.minexp = hd.exp end
        if not st.first or hd.fence < st.holders[st.first].fence then st.first = f end
      end
    elseif f == 'm' then st.mode = v
    elseif f == 'lim' then st.limit = tonumber(v)
    elseif f == 'dl' then if tonumber(v) > st.dl then st.dl = tonumber(v) end
    elseif f == 'w' then st.w = tonumber(v)
    elseif f == 'f' then st.lastfence = tonumber(v)
    end
  end
  if #dead > 0 then
    redis.call('HDEL', key, unpack(dead))
    if st.dl > now then redis.call('HSET', key, 'dl', st.dl) end
  end
  if st.alive == 0 then st.mode = nil end
  return st
end

-- Sets the hash's expiry to cover every lease with its lock-delay, the
-- lock-delay in force and waiters' marks; deletes it when nothing is left.
-- gone: a holder field to delete in the same call (a release), or nil.
local function save_ttl(key, st, gone)
  local target = st.dl
  for _, h in pairs(st.holders) do
    if h.exp + h.delay > target then target = h.exp + h.delay end
  end
  if st.w > target then target = st.w end
  if st.lastfence > 0 and now + FENCE_KEEP_MS > target then target = now + FENCE_KEEP_MS end
  if target <= now then
    redis.call('DEL', key)
    return
  end
  if st.alive == 0 then
    if gone then redis.call('HDEL', key, gone, 'm', 'lim')
    else redis.call('HDEL', key, 'm', 'lim') end
  elseif gone then
    redis.call('HDEL', key, gone)
  end
  redis.call('PEXPIRE', key, target - now)
end

-- The token's holder record, or why there is none: -1 nobody holds it,
-- -2 somebody else does.
local function holder_of(st, token)
  local me = st.holders[token]
  if me then return me, nil end
  if st.alive == 0 then return nil, -1 end
  return nil, -2
end

-- A lease's end.  `now` is Redis's clock cut to the millisecond, up to
-- 1 ms behind the real moment of the grant; one more millisecond makes sure
-- a lease never ends before grant + ttl_ms, the earliest a client can count
-- from.  Answers report the nominal remaining lease: remaining(exp).
local function cap_exp(h, ttl)
  local exp = now + ttl
  if h.hold > 0 and exp > h.hold then exp = h.hold end
  return exp + 1
end

local function remaining(exp)
  return exp - now - 1
end

local kind_code = {x = 1, s = 2, p = 3}

-- The fair queue: KEYS[2] a sorted set of waiter ids by arrival (Redis
-- microseconds), KEYS[3] a hash of their deadlines.  Waiters past their
-- deadline are dropped when they reach the head, so a waiter that died never
-- holds up the queue beyond its own deadline; one that gives up is removed
-- at once (dequeue.lua).
local function queue_head()
  while true do
    local h = redis.call('ZRANGE', KEYS[2], 0, 0)
    if #h == 0 then return nil, 0 end
    local d = tonumber(redis.call('HGET', KEYS[3], h[1]) or '0')
    if d > now then return h[1], d end
    redis.call('ZREM', KEYS[2], h[1])
    redis.call('HDEL', KEYS[3], h[1])
  end
end

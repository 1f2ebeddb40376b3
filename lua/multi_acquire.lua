#!lua flags=allow-cross-slot-keys
-- multi_acquire.lua: take several locks all or nothing, under one token.
-- (The holder layout: _holders.lua.)
--
-- KEYS     per name i: 3i-2 its hash, 3i-1 its queue zset, 3i its queue
--          deadlines hash (as acquire.lua's KEYS); then the liveness
--          hash (_holders.lua, queue_head; in Redis Cluster the slot's),
--          then the marker key the Redis layer appends (_marker.lua; its
--          value is the last ARGV, taken off there)
-- ARGV     1 token, 2 ttl_ms, 3 owner, 4 kind (x|s), 5 waiter id ('' none),
--          6 wait_left_ms (0: not waiting), 7 fair (0|1), 8 channel,
--          9 arrival ('' or absent: this call's clock, in us), 10 attempt:
--          the request's id ('' or absent: none), kept on every name it
--          takes (as acquire.lua ARGV 15)
-- New holders are announced to watchers, and a shared grant that leaves
-- room passes the wake-up on (save_ttl: _holders.lua, THE RULE).
-- Returns  {1, ttl_ms, fence_1, count_1, ttl_1, fence_2, count_2, ttl_2, ...}
--                                 all taken (a name the token held already:
--                                 re-entered); ttl_i is name i's real
--                                 remaining lease (a re-entry's is capped by
--                                 its max_hold_ms, a session-bound one's is
--                                 its session's), ttl_ms the smallest
--          {0, retry_after_ms, why, i, arrival}  busy: nothing taken; why
--                                 as acquire.lua's, i the first busy name,
--                                 arrival the score a fair waiter queued with
--          {-3, i}                the token holds name i in the other mode
--          {-8, marker}           nothing taken: the master's marker is not
--                                 what the gateway last read (_marker.lua)
-- A request that tries again (its earlier attempt's answer was lost to a
-- timeout or a dropped connection) and finds that attempt's grant on every
-- name gets that grant again, counts unchanged: its own attempt is never a
-- re-entry.  The gateway undoes an attempt whose answer it never learned
-- by that id (multi_release.lua ARGV 3, release.lua ARGV 4).
--
-- While busy it holds nothing, so two multi-locks over overlapping sets
-- never deadlock.  A waiter marks every busy name (w), so a release of any
-- of them is published and wakes it; the retry hint is the latest time a
-- busy name frees up by itself (lease end, lock-delay, fair turn), past
-- which the current obstacles are all gone.  Fair waiters join every
-- name's queue with the same arrival (this call's clock): all queues order
-- waiters alike, so the earliest is at the head of all of its names'
-- queues and no two fair waiters wait for each other.  In cluster mode a
-- request spanning slots runs this once per slot, each on its own master:
-- the gateway passes the arrival the first queueing call answered to every
-- later call (ARGV 9), so the one order holds across masters too.
--@include _layout.lua
--@include _clock.lua
--@include _marker.lua
--@include _holders.lua
local token, ttl, owner, kind = ARGV[1], ARGV[2] + 0, ARGV[3], ARGV[4]
local waiter, wait_left, fair = ARGV[5], ARGV[6] + 0, ARGV[7] == '1'
local arrival, given = now_us, ARGV[9] and ARGV[9] ~= ''
if given then arrival = ARGV[9] + 0 end
local n = (#KEYS - #KEYS % 3) / 3
local attempt = ARGV[10] or ''
live_channel = ARGV[8]

-- A fair waiter's place in name i's queue, until its wait ends.
local function join(i)
  redis.call('ZADD', KEYS[3 * i - 1], 'NX', arrival, waiter)
  redis.call('HSET', KEYS[3 * i], waiter, now + wait_left)
  if redis.call('PTTL', KEYS[3 * i]) < wait_left then
    redis.call('PEXPIRE', KEYS[3 * i - 1], wait_left)
    redis.call('PEXPIRE', KEYS[3 * i], wait_left)
  end
end

-- A given arrival may be earlier than waiters already queued here: it
-- takes its place before the queues are judged, so that it is ahead of
-- them now rather than at its next attempt, which nothing would wake.
if given and fair and wait_left > 0 then
  for i = 1, n do join(i) end
end

local sts, busy_for, why, first_busy = {}, -1, 1, 0
local own = attempt ~= ''
for i = 1, n do
  local hk = KEYS[3 * i - 2]
  local st = load(hk)
  sts[i] = st
  local h = st.holders[token]
  if not (h and h.attempt and string.sub(h.attempt, 1, -2) == attempt) then own = false end
end

-- This request's own earlier attempt took every name: its grant, again.
if own then
  local out, least = {1, ttl}, ttl
  for i = 1, n do
    if waiter ~= '' then -- a given arrival may have queued it again above
      redis.call('ZREM', KEYS[3 * i - 1], waiter)
      redis.call('HDEL', KEYS[3 * i], waiter)
    end
    local h = sts[i].holders[token]
    local left = remaining(h.exp)
    if left < least then least = left end
    out[#out + 1] = h.fence
    out[#out + 1] = h.count
    out[#out + 1] = left
  end
  out[2] = least
  return out
end

for i = 1, n do
  local st = sts[i]
  local me = st.holders[token]
  local b, bw = -1, 1
  if me then
    if st.mode ~= kind then return {-3, i} end
  else
    if st.dl > now then
      b, bw = st.dl - now, 2
    elseif st.alive > 0 and (kind == 'x' or st.mode == 'x') then
      b = st.maxexp - now
    end
    if b < 0 and st.w > now then
      local head, head_deadline = queue_head(waiter, KEYS[3 * i - 1], KEYS[3 * i])
      if head and head ~= waiter then b, bw = head_deadline - now, 3 end
    end
  end
  if b >= 0 then
    st.busy = true
    if first_busy == 0 then first_busy, why = i, bw end
    if b > busy_for then busy_for = b end
  end
end

if busy_for >= 0 then
  if wait_left > 0 then
    local until_ms = now + wait_left
    for i = 1, n do
      local st, hk = sts[i], KEYS[3 * i - 2]
      if fair then join(i) end
      if (st.busy or fair) and until_ms > st.w then
        st.w = until_ms
        redis.call('HSET', hk, 'w', until_ms)
        save_ttl(hk, st)
      end
    end
  end
  if busy_for < 1 then busy_for = 1 end
  return {0, busy_for, why, first_busy, arrival}
end

-- Fresh holds: not on a master that lost its data unnoticed (_marker.lua).
-- A call that only re-enters adds no holder and reads nothing more.
local fresh = false
for i = 1, n do fresh = fresh or not sts[i].holders[token] end
if fresh then
--@include _marker_check.lua
end

local out = {1, ttl}
local least = ttl
local exp = now + ttl + 1
for i = 1, n do
  local st, hk = sts[i], KEYS[3 * i - 2]
  if waiter ~= '' then
    redis.call('ZREM', KEYS[3 * i - 1], waiter)
    redis.call('HDEL', KEYS[3 * i], waiter)
  end
  local h = st.holders[token]
  if h then
    h.count = h.count + 1
    h.attempt = attempt ~= '' and attempt .. 'r' or nil
    if not h.session then h.exp = cap_exp(h, ttl) end
    put(hk, st, token, h, st.mode)
  else
    h = {count = 1, fence = now_us, exp = exp, ttl = ttl, hold = 0, delay = 0, owner = owner}
    if attempt ~= '' then h.attempt = attempt .. 'g' end
    if h.fence <= st.lastfence then h.fence = st.lastfence + 1 end
    st.lastfence = h.fence
    st.holders[token] = h
    st.alive = st.alive + 1
    if kind == 'x' then
      put(hk, st, token, h, 'x')
      if st.mfield then redis.call('HDEL', hk, 'm') end
    else
      redis.call('HSET', hk, token, encode(h), 'm', kind)
    end
    st.mfield = kind ~= 'x' and kind or nil
  end
  save_ttl(hk, st)
  local left = remaining(h.exp)
  if left < least then least = left end
  out[#out + 1] = h.fence
  out[#out + 1] = h.count
  out[#out + 1] = left
end
out[2] = least
return out

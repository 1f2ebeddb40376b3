#!lua flags=allow-cross-slot-keys
-- acquire.lua: take a lock (exclusive or shared) or a semaphore permit, or
-- re-enter a lock; queue fair waiters.  (The holder layout: _holders.lua.)
--
-- KEYS     hash, queue zset, queue deadlines hash, then outside Redis
--          Cluster a session-bound hold's session key (ARGV 13), and last
--          the liveness hash its queue's head is judged by (_holders.lua,
--          queue_head).  In Redis Cluster the session's key is in another
--          slot and is never declared here.  The Redis layer appends,
--          outside Redis Cluster, the liveness hash that live holders'
--          leases are read from when the caller did not declare it, and
--          the marker key to KEYS and its value to ARGV (_marker.lua,
--          which takes the value off first).
-- ARGV     short form, the common case (exclusive, no owner, max-hold,
--          lock-delay or waiting): 1 token, 2 ttl_ms[, 3 channel: Redis
--          Cluster mode's shard channel, which cannot be derived]
--          long form: 1 token, 2 ttl_ms, 3 owner, 4 max_hold_ms (0 none),
--          5 lock_delay_ms, 6 kind (x|s|p), 7 limit (p), 8 waiter id ('' none),
--          9 wait_left_ms (0: not waiting), 10 fair (0|1), 11 channel, 12 message,
--          13 session token ('' or absent: none; outside Cluster KEYS[4] is
--          its key),
--          14 API key id ('' or absent: none), 15 attempt: the request's id
--          when it may try again ('' or absent: none)
-- Returns  fence (a bare integer > 0)           the fast path: acquired by a
--                                               new holder, count 1, ttl_ms
--                                               as asked, 1 holder
--          {1, fence, count, ttl_ms, holders[, dropped]}  acquired by a new holder
--          {2, fence, count, ttl_ms, holders}   re-entered
-- A request that tries again (it waits, and an earlier attempt's answer was
-- lost to a timeout or a dropped connection) and finds that attempt's grant
-- gets that grant's answer again, 1 or 2 as it was, count unchanged: its
-- own attempt is never counted as a re-entry.
--          {0, retry_after_ms, why, dropped}    busy; why: 1 held (or full),
--                                               2 lock-delay, 3 fair waiters
--                                               queued ahead and none holds
--          {-3}                                 token holds it in the other mode
--          {-4, limit}                          semaphore limit differs
--          {-6}                                 the session has ended
--          {-8, marker}                         a fresh hold refused: the
--                                               master's marker is not what
--                                               the gateway last read (it
--                                               lost its data: _marker.lua)
--          {-7}                                 a re-entry whose Session
--                                               (ARGV 13) is not the hold's:
--                                               a hold keeps the binding it
--                                               was acquired with
-- A session-bound hold (ARGV 13) lives by its session's lease (_holders.lua,
-- sessions): its lease end is the session's end, its lock-delay the
-- session's or its own, the longer.  With the session's key declared (one
-- master holds both), both are read from it here, the hold is listed in
-- it, and it is live (its lease the session's liveness field) when the
-- session keeps one; in Redis Cluster (no session key) the gateway read
-- them first and sends the session's remaining time as ttl_ms and the
-- longer lock-delay, lists the hold itself, and the hold carries the
-- session's end.  The answer's ttl_ms is the session's
-- remaining time; waiters on a session-bound name get that as their retry
-- hint, so they try again when the session would expire.
-- dropped: queue entries of dead gateways this call removed (_holders.lua);
-- a grant carries it only when it is not 0.
--
-- Fence: at least the clock in microseconds and more than the name's last
-- fence (any holder's, x's record or field f), so fences grow across expiry
-- and restarts.
--@include _layout.lua
--@include _clock.lua
--@include _marker.lua
local token, ttl = ARGV[1], ARGV[2] + 0
local flat = redis.call('HGETALL', KEYS[1])

-- Fast path: the short form on a name nobody holds, with no lock-delay
-- pending, no waiter or watch mark and no shared state: the hash is empty
-- or holds only x's ended record.  Five Redis calls (TIME, HGETALL, HSET,
-- PEXPIRE, PUBSUB NUMPAT),
-- none of _holders.lua's functions made, and a bare integer for an answer
-- (a table costs Redis more than a redis.call: bench/RESULTS.md).
local short = #ARGV <= 3
if short then
  local last = -1
  if #flat == 0 then
    last = 0
  elseif #flat == 2 and flat[1] == 'x' then
    local v = flat[2]
    local _, _, fence, exp, _, pos = struct.unpack(X_HEAD, v)
    local delay = 0
    if pos <= #v then delay = select(2, struct.unpack('<I6I4', v, pos)) end
    if exp + delay <= now then last = fence end
  end
  if last >= 0 then
--@include _marker_check.lua
    local fence = now_us
    if fence <= last then fence = last + 1 end
    redis.call('HSET', KEYS[1], 'x', struct.pack(X_HEAD, token, 1, fence, now + ttl + 1, ttl))
    redis.call('PEXPIRE', KEYS[1], ttl + 1 + FENCE_KEEP_MS)
    -- A change of holder, published for prefix streams while some client
    -- has a pattern (_holders.lua, "prefix streams"; its message, built
    -- here for this one state).
    if redis.call('PUBSUB', 'NUMPAT') > 0 then
      local f = string.format('%d', fence)
      publish_change(KEYS[1], string.format('%d', now_us) .. '-1\0granted\0' ..
                     '0\0' .. '1\0' .. '1\0' .. f .. '\0' .. ttl .. '\0' .. '1\0' .. '0\0' ..
                     f .. '\0\0\0' .. ttl)
    end
    return fence
  end
end

--@include _holders.lua
live_channel = release_channel(11)
local kind, limit = ARGV[6] or 'x', tonumber(ARGV[7] or '0')
local waiter, wait_left, fair = ARGV[8] or '', tonumber(ARGV[9] or '0'), ARGV[10] == '1'
local owner, max_hold, delay = short and '' or ARGV[3], tonumber(ARGV[4] or '0'), tonumber(ARGV[5] or '0')

local session = ARGV[13]
if session == '' then session = nil end
local session_end, live = 0, false
local skey = KEYS[4] and string.find(KEYS[4], 'session:{', 1, true) and KEYS[4]
if session and skey then
  local s = redis.call('HMGET', skey, 'e', 'd', 'h')
  session_end = tonumber(s[1] or '0')
  if session_end <= now then return {-6} end
  -- A session that keeps a liveness field (its horizon h set with it,
  -- _session.lua) carries live holds; one from before, carried ones.
  live = s[3] ~= false
  local sdelay = tonumber(s[2] or '0')
  if sdelay > delay then delay = sdelay end
elseif session then
  -- Redis Cluster: the session's key lives in another slot, so the gateway
  -- read it first and sends its remaining time as ttl_ms, the longer
  -- lock-delay as lock_delay_ms.
  session_end = now + ttl + 1
end

local attempt = ARGV[15] or ''
local st = load(KEYS[1], flat)
local me = st.holders[token]
if me then
  if st.mode ~= kind then return {-3} end
  if attempt ~= '' and me.attempt and string.sub(me.attempt, 1, -2) == attempt then
    local fresh = string.sub(me.attempt, -1) == 'g'
    return {fresh and 1 or 2, me.fence, me.count, remaining(me.exp), st.alive}
  end
  -- A Session header on a re-entry names the session the hold lives by, or
  -- is refused: it would neither bind a plain hold nor move a bound one.
  if session and me.session ~= session then return {-7} end
  me.count = me.count + 1
  me.attempt = attempt ~= '' and attempt .. 'r' or nil
  if not me.session then
    me.exp = cap_exp(me, ttl)
  elseif me.carried or me.live then
    me.exp = session_end
  end
  put(KEYS[1], st, token, me, st.mode)
  save_ttl(KEYS[1], st)
  return {2, me.fence, me.count, remaining(me.exp), st.alive}
end

if kind == 'p' and st.alive > 0 and st.limit ~= limit then return {-4, st.limit} end

local busy_for = -1
if st.dl > now then
  busy_for = st.dl - now
elseif st.alive > 0 and (kind == 'x' or st.mode == 'x') then
  busy_for = st.maxexp - now
elseif kind == 'p' and st.alive >= limit then
  busy_for = st.minexp - now
end

-- Queued fair waiters come first, for fair and unfair requests alike.  A
-- queued waiter's deadline is never past w, so with w gone by the queue is
-- empty (or holds only the expired) and is not read.
local head, head_deadline = nil, 0
local queued = false
if st.w > now then head, head_deadline = queue_head(waiter) end
if busy_for < 0 and head and head ~= waiter then
  queued = true
  busy_for = head_deadline - now
  if st.alive > 0 and st.maxexp - now < busy_for then busy_for = st.maxexp - now end
end

if busy_for >= 0 then
  if wait_left > 0 then
    local until_ms = now + wait_left
    if fair then
      redis.call('ZADD', KEYS[2], 'NX', now_us, waiter)
      redis.call('HSET', KEYS[3], waiter, until_ms)
      local qttl = redis.call('PTTL', KEYS[3])
      if qttl < wait_left then
        redis.call('PEXPIRE', KEYS[2], wait_left)
        redis.call('PEXPIRE', KEYS[3], wait_left)
      end
    end
    if until_ms > st.w then
      st.w = until_ms
      redis.call('HSET', KEYS[1], 'w', until_ms)
      save_ttl(KEYS[1], st)
    end
  end
  if busy_for < 1 then busy_for = 1 end
  local why = queued and 3 or st.dl > now and 2 or 1
  return {0, busy_for, why, queue_dropped}
end

-- A fresh hold: not on a master that lost its data unnoticed (_marker.lua).
--@include _marker_check.lua

if waiter ~= '' then
  redis.call('ZREM', KEYS[2], waiter)
  redis.call('HDEL', KEYS[3], waiter)
end

local h = {count = 1, fence = 0, exp = now + ttl + 1, ttl = ttl, hold = 0,
           delay = delay, owner = owner, key_id = ARGV[14] or ''}
if attempt ~= '' then h.attempt = attempt .. 'g' end
if max_hold > 0 then h.hold = now + max_hold end
if session then
  h.session, h.exp, h.ttl, h.hold = session, session_end, 0, 0
  if live then h.live = true else h.carried = true end
  ttl = remaining(session_end)
  -- Listed in its session (in Redis Cluster the gateway lists it, in the
  -- session's own slot).
  if skey then redis.call('HSET', skey, KEYS[1], token) end
end
-- A permit has no fence: its record's fence field keeps its grant time
-- (for listings and the watch index), outside the name's fences (load()).
h.fence = now_us
if kind ~= 'p' then
  if h.fence <= st.lastfence then h.fence = st.lastfence + 1 end
  st.lastfence = h.fence
end
st.holders[token] = h
st.alive = st.alive + 1
if kind == 'x' then
  put(KEYS[1], st, token, h, 'x')
  if st.mfield then redis.call('HDEL', KEYS[1], 'm') end
elseif kind == 's' then
  redis.call('HSET', KEYS[1], token, encode(h), 'm', kind)
else
  redis.call('HSET', KEYS[1], token, encode(h), 'm', kind, 'lim', limit)
  st.limit = limit
end
st.mfield = kind ~= 'x' and kind or nil
-- Announces the new holder, and passes the wake-up on when it leaves room
-- (_holders.lua, THE RULE).
save_ttl(KEYS[1], st)
if queue_dropped > 0 then return {1, h.fence, 1, ttl, st.alive, queue_dropped} end
return {1, h.fence, 1, ttl, st.alive}

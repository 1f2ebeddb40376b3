-- acquire.lua: take a lock (exclusive or shared) or a semaphore permit, or
-- re-enter a lock; queue fair waiters.  (The holder layout: _holders.lua.)
--
-- KEYS     hash, queue zset, queue deadlines hash
-- ARGV     1 token, 2 ttl_ms, 3 owner, 4 max_hold_ms (0 none), 5 lock_delay_ms,
--          6 kind (x|s|p), 7 limit (p), 8 waiter id ('' none),
--          9 wait_left_ms (0: not waiting), 10 fair (0|1), 11 channel, 12 message
-- Returns  {1, fence, count, ttl_ms, holders[, dropped]}  acquired by a new holder
--          {2, fence, count, ttl_ms, holders}   re-entered
--          {0, retry_after_ms, why, dropped}    busy; why: 1 held (or full),
--                                               2 lock-delay, 3 fair waiters
--                                               queued ahead and none holds
--          {-3}                                 token holds it in the other mode
--          {-4, limit}                          semaphore limit differs
-- dropped: queue entries of dead gateways this call removed (_holders.lua);
-- a grant carries it only when it is not 0.
--
-- Fence: at least the clock in microseconds and more than the name's last
-- fence (any holder's, or field f), so fences grow across expiry and restarts.
local token, ttl, kind = ARGV[1], tonumber(ARGV[2]), ARGV[6]
local limit = tonumber(ARGV[7])
local waiter, wait_left, fair = ARGV[8], tonumber(ARGV[9]), ARGV[10] == '1'

local st = load(KEYS[1])
local me = st.holders[token]
if me then
  if st.mode ~= kind then return {-3} end
  me.count = me.count + 1
  me.exp = cap_exp(me, ttl)
  redis.call('HSET', KEYS[1], token, encode(me))
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
  -- The head may be one whose dead predecessor was just dropped: wake it.
  if queue_dropped > 0 then redis.call('PUBLISH', ARGV[11], ARGV[12]) end
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

if waiter ~= '' then
  redis.call('ZREM', KEYS[2], waiter)
  redis.call('HDEL', KEYS[3], waiter)
end

local h = {count = 1, fence = 0, exp = now + ttl + 1, ttl = ttl, hold = 0,
           delay = tonumber(ARGV[5]), owner = ARGV[3]}
if tonumber(ARGV[4]) > 0 then h.hold = now + tonumber(ARGV[4]) end
if kind ~= 'p' then
  h.fence = now_us
  if h.fence <= st.lastfence then h.fence = st.lastfence + 1 end
  st.lastfence = h.fence
end
st.holders[token] = h
st.alive = st.alive + 1
if kind == 'x' then
  redis.call('HSET', KEYS[1], token, encode(h))
  if st.mfield then redis.call('HDEL', KEYS[1], 'm') end
elseif kind == 's' then
  redis.call('HSET', KEYS[1], token, encode(h), 'm', kind)
else
  redis.call('HSET', KEYS[1], token, encode(h), 'm', kind, 'lim', limit)
end
st.mfield = kind ~= 'x' and kind or nil
save_ttl(KEYS[1], st)

-- Room for more (shared, or permits left) and someone waiting: pass the
-- wake-up on, so waiters enter one after another without a herd.
if st.w > now and (kind == 's' or (kind == 'p' and st.alive < limit)) then
  redis.call('PUBLISH', ARGV[11], ARGV[12])
end
if queue_dropped > 0 then return {1, h.fence, 1, ttl, st.alive, queue_dropped} end
return {1, h.fence, 1, ttl, st.alive}

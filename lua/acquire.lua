-- acquire.lua: take a lock (exclusive or shared) or a semaphore permit, or
-- re-enter a lock; queue fair waiters.  (The holder layout: _holders.lua.)
--
-- KEYS     hash, fence key, queue zset, queue deadlines hash
-- ARGV     1 token, 2 ttl_ms, 3 owner, 4 max_hold_ms (0 none), 5 lock_delay_ms,
--          6 fence_keep_ms, 7 kind (x|s|p), 8 limit (p), 9 waiter id ('' none),
--          10 wait_left_ms (0: not waiting), 11 fair (0|1), 12 channel, 13 message
-- Returns  {1, fence, count, ttl_ms, holders}   acquired by a new holder
--          {2, fence, count, ttl_ms, holders}   re-entered
--          {0, retry_after_ms}                  busy
--          {-3}                                 token holds it in the other mode
--          {-4, limit}                          semaphore limit differs
--
-- Fence: at least the clock in microseconds and more than the name's last
-- fence, so fences grow across expiry, restarts and a forgotten fence key.
local token, ttl, kind = ARGV[1], tonumber(ARGV[2]), ARGV[7]
local limit = tonumber(ARGV[8])
local waiter, wait_left, fair = ARGV[9], tonumber(ARGV[10]), ARGV[11] == '1'

local st = load(KEYS[1])
local me = st.holders[token]
if me then
  if st.mode ~= kind then return {-3} end
  me.count = me.count + 1
  me.exp = cap_exp(me, ttl)
  redis.call('HSET', KEYS[1], token, encode(me))
  save_ttl(KEYS[1], st)
  return {2, me.fence, me.count, me.exp - now, st.alive}
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

-- Queued fair waiters come first, for fair and unfair requests alike.
local head, head_deadline = queue_head()
if busy_for < 0 and head and head ~= waiter then
  busy_for = head_deadline - now
  if st.alive > 0 and st.maxexp - now < busy_for then busy_for = st.maxexp - now end
end

if busy_for >= 0 then
  if wait_left > 0 then
    local until_ms = now + wait_left
    if fair then
      redis.call('ZADD', KEYS[3], 'NX', now_us, waiter)
      redis.call('HSET', KEYS[4], waiter, string.format('%d', until_ms))
      local qttl = redis.call('PTTL', KEYS[4])
      if qttl < wait_left then
        redis.call('PEXPIRE', KEYS[3], wait_left)
        redis.call('PEXPIRE', KEYS[4], wait_left)
      end
    end
    if until_ms > st.w then
      st.w = until_ms
      redis.call('HSET', KEYS[1], 'w', string.format('%d', until_ms))
      save_ttl(KEYS[1], st)
    end
  end
  if busy_for < 1 then busy_for = 1 end
  return {0, busy_for}
end

if waiter ~= '' then
  redis.call('ZREM', KEYS[3], waiter)
  redis.call('HDEL', KEYS[4], waiter)
end

local fence = 0
if kind ~= 'p' then
  local last = tonumber(redis.call('GET', KEYS[2]) or '0')
  fence = now_us
  if fence <= last then fence = last + 1 end
  redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[6])
end

local hold = 0
if tonumber(ARGV[4]) > 0 then hold = now + tonumber(ARGV[4]) end
local h = {count = 1, fence = fence, exp = now + ttl, ttl = ttl, hold = hold,
           delay = tonumber(ARGV[5]), owner = ARGV[3]}
st.holders[token] = h
st.alive = st.alive + 1
redis.call('HSET', KEYS[1], token, encode(h), 'm', kind)
if kind == 'p' then redis.call('HSET', KEYS[1], 'lim', limit) end
save_ttl(KEYS[1], st)

-- Room for more (shared, or permits left) and someone waiting: pass the
-- wake-up on, so waiters enter one after another without a herd.
if st.w > now and (kind == 's' or (kind == 'p' and st.alive < limit)) then
  redis.call('PUBLISH', ARGV[12], ARGV[13])
end
return {1, fence, 1, ttl, st.alive}

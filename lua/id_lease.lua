-- id_lease.lua -- lease a block of id sequence numbers for one namespace.
--
-- KEYS[1]  the namespace's high-water mark: a hash {sec, seq} holding the last
--          second (since the epoch) and the last sequence number ever granted.
-- ARGV[1]  the epoch, unix seconds (default 1704067200, 2024-01-01T00:00:00Z)
-- ARGV[2]  how many numbers are wanted, 1 .. 1048576
--
-- Returns {second, first, last}: numbers first..last (inclusive) of `second`
-- belong to the caller alone.  Fewer than wanted are granted when the second
-- has fewer left.  Every answer lies above every earlier one for this key,
-- which is what makes ids unique across gateways and increasing across
-- leases: the second comes from Redis's clock (TIME), the one clock all
-- gateways share, and never goes below the stored mark, so a Redis clock that
-- steps back makes ids continue in the last second used instead of
-- repeating.  A second's 2^32 numbers are never wrapped: when they run out
-- the mark moves to the next second.
--
-- The key has no TTL on purpose: forgetting it would let a clock that stepped
-- back reissue ids.  Its cost is one small hash (two short fields, tens of
-- bytes) per namespace ever used.
--
-- Lua numbers are doubles; every value here is below 2^33, so exact.
-- TIME in a script that writes is fine: Redis 7 replicates a script's
-- effects, not the script.

local epoch = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
if not epoch or epoch ~= math.floor(epoch) then
  return redis.error_reply('ERR id_lease: epoch must be an integer')
end
if not want or want ~= math.floor(want) or want < 1 or want > 1048576 then
  return redis.error_reply('ERR id_lease: count must be an integer in 1..1048576')
end

local SEQ_MAX = 4294967295   -- 2^32 - 1
local SEC_MAX = 2147483647   -- 31 bits of seconds

local now = tonumber(redis.call('TIME')[1]) - epoch
local mark = redis.call('HMGET', KEYS[1], 'sec', 'seq')
local last_sec, last_seq = tonumber(mark[1]), tonumber(mark[2])

local sec, first
if last_sec == nil or last_seq == nil or now > last_sec then
  sec, first = now, 0
elseif last_seq >= SEQ_MAX then
  sec, first = last_sec + 1, 0            -- this second is used up: next one
else
  sec, first = last_sec, last_seq + 1     -- same second, or Redis's clock went back
end

if sec < 0 or sec > SEC_MAX then
  return redis.error_reply('ERR id_lease: Redis time outside the id epoch')
end

local last = first + want - 1
if last > SEQ_MAX then
  last = SEQ_MAX
end

redis.call('HSET', KEYS[1], 'sec', string.format('%d', sec),
           'seq', string.format('%d', last))
return {sec, first, last}

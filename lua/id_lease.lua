-- id_lease.lua -- lease a block of id sequence numbers for one namespace.
--
-- KEYS[1]  the namespace's high-water mark: a hash holding
--            sec, seq  the last second (since the epoch) and the last
--                      sequence number ever granted: the high and low halves
--                      of the last id;
--            ep        the epoch (unix seconds) the mark was made with;
--            run       the identity of the Redis that wrote it (_identity.lua:
--                      its run_id and replication id).
-- KEYS[2]  this Redis's id era, in the same slot: a hash {run, since}, the
--          identity of the Redis that last leased here and the unix time in
--          microseconds
--          its era began.
-- ARGV[1]  the epoch, unix seconds (default 1704067200, 2024-01-01T00:00:00Z)
-- ARGV[2]  how many numbers are wanted, 1 .. 1048576
-- ARGV[3]  the gateway's floor: the second of the highest id it has leased
--          for this namespace, or -1 when it has none
-- ARGV[4]  the floor's sequence number (ignored when ARGV[3] is -1)
-- ARGV[5]  the jump, in seconds (--id-jump-s)
-- ARGV[6]  1 when the floor may be another namespace's (the gateway's table
--          of evicted floors shares a slot): instead of refusing, place the
--          block in the second after the floor, where a refusal would have
--          let it land once Redis's clock got there: past the floor's second,
--          and so past any lease lost with it
--
-- Returns {second, first, last, jumped}: numbers first..last (inclusive) of
-- `second` belong to the caller alone; fewer than wanted are granted when
-- the second has fewer left; jumped is 1 when the lease jumped for a mark
-- that was missing, 2 for a mark another Redis wrote (see below), else 0.
-- Or, writing no mark (the era may begin, see below):
--   {-1, second, first}  the block would start at or below the floor: this
--                        Redis has lost ids the gateway already handed out;
--   {-2, ep, 0}          the mark was made with an earlier epoch (ep).
--
-- Every answer lies above every earlier one for this key, which is what
-- makes ids unique across gateways and increasing across leases: the second
-- comes from Redis's clock (TIME), the one clock all gateways share, and
-- never goes below the stored mark, so a Redis clock that steps back makes
-- ids continue in the last second used instead of repeating.  A second's
-- 2^32 numbers are never wrapped: when they run out the mark moves to the
-- next second.
--
-- What the mark cannot say is whether it is the last one written.  A replica
-- promoted after losing the last replicated writes, or a Redis restarted
-- without (or with too little) persistence, or FLUSHALL, holds an older mark
-- or none, and leases lost with it may reach any second up to the old
-- master's clock.  Each of these starts a new era: the era key names
-- another identity (a restart makes a new run_id, a promotion a new
-- replication id), or is gone.  For `jump` seconds from the era's start, a mark that
-- is missing or that another Redis wrote may have lost leases, so the lease
-- starts at the era's start plus the jump (and above the mark's second),
-- clear of anything issued before, as long as the Redis hosts' clocks agree
-- within the jump.  After that window Redis's clock itself is past them,
-- and leases go on as usual; a namespace that is simply new never jumps
-- then.  The cost is a one-off step of up to `jump` seconds in the ids'
-- time, for the namespaces leased in that window.
--
-- An era's jumped leases are themselves ahead of the clock, so a second
-- loss within the same second (a Redis without persistence restarted twice
-- by a supervisor) would jump to the same second again.  So a jump starts
-- that second's sequence at the era's start within its second, scaled to
-- the lower half of the sequence space (a microsecond is 2147 numbers): a
-- later era of the same second starts above every number an earlier one
-- could have used, short of 2^31 numbers a second.

-- The epoch is part of the mark because the clock test above compares
-- Redis's clock, in this gateway's epoch, with the mark: a gateway whose
-- epoch is later than the mark's reads a clock behind ids already issued,
-- and after a failover would land among them.  So a later epoch is refused
-- (loudly, by the gateway), and an earlier one, README's recovery move,
-- becomes the mark's from this lease on, refusing the later ones left.
--
-- The key has no TTL on purpose: forgetting it would let a clock that
-- stepped back reissue ids.  Its cost is one small hash per namespace.
--
-- Lua numbers are doubles; every value here is below 2^33, so exact.  TIME
-- and INFO in a script that writes are fine: Redis 7 replicates a script's
-- effects, not the script.

--@include _identity.lua
local epoch, want = tonumber(ARGV[1]), tonumber(ARGV[2])
local fsec, fseq, jump = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local soft = ARGV[6] == '1'
if not epoch or epoch ~= math.floor(epoch) then
  return redis.error_reply('ERR id_lease: epoch must be an integer')
end
if not want or want ~= math.floor(want) or want < 1 or want > 1048576 then
  return redis.error_reply('ERR id_lease: count must be an integer in 1..1048576')
end
if not fsec or not fseq or not jump or jump < 0 then
  return redis.error_reply('ERR id_lease: floor and jump must be integers')
end

local SEQ_MAX = 4294967295   -- 2^32 - 1
local SEC_MAX = 2147483647   -- 31 bits of seconds

local run = redis_identity()
local time = redis.call('TIME')
local unix = tonumber(time[1])
local now = unix - epoch
local mark = redis.call('HMGET', KEYS[1], 'sec', 'seq', 'ep', 'run')
local last_sec, last_seq, mark_ep = tonumber(mark[1]), tonumber(mark[2]), tonumber(mark[3])

if mark_ep and epoch > mark_ep then
  return {-2, mark_ep, 0}
end

local era = redis.call('HMGET', KEYS[2], 'run', 'since')
local since_us = tonumber(era[2])
if era[1] ~= run or not since_us then
  since_us = unix * 1000000 + tonumber(time[2])
  redis.call('HSET', KEYS[2], 'run', run, 'since', string.format('%d', since_us))
end
local since = math.floor(since_us / 1000000)

local sec, first, jumped = nil, nil, 0
if unix < since + jump and (last_sec == nil or last_seq == nil or mark[4] ~= run) then
  jumped = 2
  if last_sec == nil or last_seq == nil then jumped = 1 end
  sec = since - epoch + jump              -- clear of what the old era issued
  first = math.floor((since_us % 1000000) * 2147.483648)
  if last_sec and sec <= last_sec then sec, first = last_sec + 1, 0 end
elseif last_sec == nil or last_seq == nil or now > last_sec then
  sec, first = now, 0
elseif last_seq >= SEQ_MAX then
  sec, first = last_sec + 1, 0            -- this second is used up: next one
else
  sec, first = last_sec, last_seq + 1     -- same second, or Redis's clock went back
end

if fsec >= 0 and (sec < fsec or (sec == fsec and first <= fseq)) then
  if not soft then
    return {-1, sec, first}               -- written nothing: see the header
  end
  sec, first = fsec + 1, 0                -- past a floor that may be another's
end

if sec < 0 or sec > SEC_MAX then
  return redis.error_reply('ERR id_lease: Redis time outside the id epoch')
end

local last = first + want - 1
if last > SEQ_MAX then
  last = SEQ_MAX
end

redis.call('HSET', KEYS[1], 'sec', string.format('%d', sec), 'seq', string.format('%d', last),
           'ep', string.format('%d', epoch), 'run', run)
return {sec, first, last, jumped}

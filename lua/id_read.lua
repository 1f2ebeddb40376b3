-- id_read.lua: quorum mode, phase 1 of leasing an id block.  Reads, changes
-- nothing.
--
-- KEYS[1]  the namespace's high-water mark (see id_lease.lua)
-- KEYS[2]  this master's id era (see id_lease.lua)
-- ARGV[1]  the epoch, unix seconds
-- ARGV[2]  the jump, in seconds (--id-jump-s)
-- Returns  {now, sec, seq, since}: this master's clock in seconds since
--          the epoch, its mark (-1, -1 when it has none), and when the lease
--          must jump (within the jump of a new era, a mark missing or
--          written by another Redis: id_lease.lua says why) the era's start
--          in unix microseconds, else 0; or {-2, ep, 0, 0} when the mark was
--          made with an epoch earlier than ARGV[1].
--@include _identity.lua
local epoch, jump = tonumber(ARGV[1]), tonumber(ARGV[2])
local time = redis.call('TIME')
local unix = tonumber(time[1])
local run = redis_identity()
local mark = redis.call('HMGET', KEYS[1], 'sec', 'seq', 'ep', 'run')
local mark_ep = tonumber(mark[3])
if mark_ep and epoch > mark_ep then return {-2, mark_ep, 0, 0} end
local era = redis.call('HMGET', KEYS[2], 'run', 'since')
local since_us = tonumber(era[2])
if era[1] ~= run or not since_us then since_us = unix * 1000000 + tonumber(time[2]) end
local jumping = 0
if unix < math.floor(since_us / 1000000) + jump and (mark[1] == false or mark[4] ~= run) then
  jumping = since_us
end
return {unix - epoch, tonumber(mark[1]) or -1, tonumber(mark[2]) or -1, jumping}

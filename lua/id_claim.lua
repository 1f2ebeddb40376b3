-- id_claim.lua: quorum mode, phase 2 of leasing an id block.
--
-- The gateway read the marks of a quorum (id_read.lua) and chose a block
-- above all of them.  Here each master takes the block only if its mark is
-- still below the block's start, and then moves its mark to the block's
-- end, recording the epoch and its own identity as id_lease.lua does.  Two
-- gateways that chose overlapping blocks cannot both get a quorum: any two
-- quorums share a master, and that master accepts only the first of the two
-- claims.  A gateway whose claim fails reads again.
--
-- KEYS[1]  the namespace's high-water mark (see id_lease.lua)
-- KEYS[2]  this master's id era (see id_lease.lua): begun here if it names
--          another Redis or is gone
-- ARGV     1 second, 2 first sequence, 3 last sequence of the block, 4 epoch
-- Returns  1 claimed, 0 refused
--@include _identity.lua
local sec, first, last = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local epoch = tonumber(ARGV[4])
local mark = redis.call('HMGET', KEYS[1], 'sec', 'seq', 'ep')
local msec, mseq = tonumber(mark[1]) or -1, tonumber(mark[2]) or -1
if msec > sec or (msec == sec and mseq >= first) then return 0 end
if tonumber(mark[3]) and epoch > tonumber(mark[3]) then return 0 end
local run = redis_identity()
local era = redis.call('HMGET', KEYS[2], 'run', 'since')
if era[1] ~= run or not tonumber(era[2]) then
  local time = redis.call('TIME')
  redis.call('HSET', KEYS[2], 'run', run, 'since',
             string.format('%d', tonumber(time[1]) * 1000000 + tonumber(time[2])))
end
redis.call('HSET', KEYS[1], 'sec', string.format('%d', sec), 'seq', string.format('%d', last),
           'ep', string.format('%d', epoch), 'run', run)
return 1

-- id_claim.lua: quorum mode, phase 2 of leasing an id block.
--
-- The gateway read the marks of a quorum (id_read.lua) and chose a block
-- above all of them.  Here each master takes the block only if its mark is
-- still below the block's start, and then moves its mark to the block's
-- end.  Two gateways that chose overlapping blocks cannot both get a
-- quorum: any two quorums share a master, and that master accepts only
-- the first of the two claims.  A gateway whose claim fails reads again.
--
-- KEYS[1]  the namespace's high-water mark (see id_lease.lua)
-- ARGV     1 second, 2 first sequence, 3 last sequence of the block
-- Returns  1 claimed, 0 refused
local sec, first, last = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local mark = redis.call('HMGET', KEYS[1], 'sec', 'seq')
local msec, mseq = tonumber(mark[1]) or -1, tonumber(mark[2]) or -1
if msec > sec or (msec == sec and mseq >= first) then return 0 end
redis.call('HSET', KEYS[1], 'sec', string.format('%d', sec), 'seq', string.format('%d', last))
return 1

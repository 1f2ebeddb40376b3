-- id_read.lua: quorum mode, phase 1 of leasing an id block.  Reads, changes
-- nothing.
--
-- KEYS[1]  the namespace's high-water mark (see id_lease.lua)
-- ARGV[1]  the epoch, unix seconds
-- Returns  {now, sec, seq}: this master's clock in seconds since the epoch,
--          and its mark (-1, -1 when it has none)
local now = tonumber(redis.call('TIME')[1]) - tonumber(ARGV[1])
local mark = redis.call('HMGET', KEYS[1], 'sec', 'seq')
return {now, tonumber(mark[1]) or -1, tonumber(mark[2]) or -1}

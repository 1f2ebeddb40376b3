-- id_raise.lua: quorum mode.  After leasing a block from a majority of
-- masters, the gateway raises every master's high-water mark to the end of
-- the block it chose (the highest one offered), so any later lease through
-- any majority starts above it.  Never lowers a mark.
--
-- KEYS[1]  the namespace's high-water mark (see id_lease.lua)
-- ARGV     1 second, 2 last sequence of the chosen block
-- Returns  1
local mark = redis.call('HMGET', KEYS[1], 'sec', 'seq')
local sec, seq = tonumber(ARGV[1]), tonumber(ARGV[2])
local last_sec, last_seq = tonumber(mark[1]) or -1, tonumber(mark[2]) or -1
if sec > last_sec or (sec == last_sec and seq > last_seq) then
  redis.call('HSET', KEYS[1], 'sec', string.format('%d', sec), 'seq', string.format('%d', seq))
end
return 1

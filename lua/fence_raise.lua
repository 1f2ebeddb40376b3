-- fence_raise.lua: quorum mode.  After a majority granted a lock, the
-- gateway raises every master's last fence for the name to the fence it
-- answered (the highest of the majority's), so any later majority, which
-- shares at least one master with this one, answers a higher fence.
--
-- KEYS[1]  the name's fence key (see acquire.lua)
-- ARGV     1 fence, 2 fence_keep_ms
-- Returns  1
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if cur < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1

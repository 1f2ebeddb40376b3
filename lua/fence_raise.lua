-- fence_raise.lua: quorum mode.  After a majority granted a lock, the
-- gateway raises every master's last fence for the name to the fence it
-- answered (the highest of the majority's), so any later majority, which
-- shares at least one master with this one, answers a higher fence.
--
-- KEYS[1]  the lock's hash (field f, see _holders.lua)
-- ARGV     1 fence, 2 how long to keep it (ms)
-- Returns  1
local cur = tonumber(redis.call('HGET', KEYS[1], 'f') or '0')
if cur < tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'f', ARGV[1])
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
end
return 1

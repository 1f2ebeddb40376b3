-- holdoff.lua: a gateway noticed that this master lost its data
-- (server/lossguard.h) and records the hold-off in Redis, so that every
-- gateway learns it on its next marker read: one started after the loss
-- (it never read the old marker, so it cannot notice the loss itself), and
-- one restarted during the hold-off (which would otherwise forget it).
--
-- KEYS[1]  <prefix>holdoff (Redis Cluster: <prefix>holdoff{TAG}, TAG the
--          master marker's, so the same slot)
-- ARGV[1]  the hold-off, ms (the noticing gateway's --max-lease-ms)
-- Returns  the hold-off left, ms (PTTL)
--
-- The value is the hold-off's end in Redis's clock (ms) and the key
-- expires then, so no gateway's clock matters: readers take PTTL.  A
-- later end is kept (two losses, or gateways with different
-- --max-lease-ms): the key is only ever moved later.
local T = redis.call('TIME')
local now = T[1] * 1000 + math.floor(T[2] / 1000)
local hold = tonumber(ARGV[1])
local want = now + hold
local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if cur < want then
  redis.call('SET', KEYS[1], string.format('%d', want), 'PX', hold)
end
return redis.call('PTTL', KEYS[1])

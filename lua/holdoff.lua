-- holdoff.lua: a gateway noticed that this master lost its data
-- (server/lossguard.h) and records the hold-off in Redis, so that every
-- gateway learns it on its next marker read: one started after the loss
-- (it never read the old marker, so it cannot notice the loss itself), and
-- one restarted during the hold-off (which would otherwise forget it).
--
-- KEYS[1]  <prefix>holdoff (Redis Cluster: <prefix>holdoff{TAG}, TAG the
--          master marker's, so the same slot)
-- ARGV     1 the hold-off, ms (the noticing gateway's --max-lease-ms),
--          2 the marker the loss left (it names the loss)
-- Returns  the hold-off left, ms (PTTL)
--
-- The value is "END START MARKER": the hold-off's end and the loss's first
-- notice in Redis's clock (ms), and the loss's marker; the key expires at
-- END, so no gateway's clock matters (readers take PTTL).  One loss is
-- noticed by many connections and gateways, each a little later: they
-- time it from its first notice (START), so it is not stretched by the
-- last to notice; a longer --max-lease-ms moves END later.  Another loss
-- (another marker) starts its own hold-off, and END only ever moves later.
local T = redis.call('TIME')
local now = T[1] * 1000 + math.floor(T[2] / 1000)
local hold, marker = tonumber(ARGV[1]), ARGV[2]
local start, last = now, 0
local cur = redis.call('GET', KEYS[1])
if cur then
  local e, s, m = string.match(cur, '^(%d+) (%d+) (.*)$')
  if e then
    last = tonumber(e)
    if m == marker then start = tonumber(s) end
  end
end
local want = start + hold
if want > last and want > now then
  redis.call('SET', KEYS[1], string.format('%d %d %s', want, start, marker), 'PX', want - now)
end
return redis.call('PTTL', KEYS[1])

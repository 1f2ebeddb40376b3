-- liveness.lua: a gateway says it is alive (server/liveness.c): one field
-- per gateway, valued with the end of its liveness (ms, Redis's clock), in
-- one hash, <prefix>gw (single, Sentinel; on every master in quorum mode),
-- or in Redis Cluster mode one hash per slot with the gateway's fair
-- waiters, <prefix>gw{<slot tag>}.  The scripts that judge a queue's head
-- declare that hash (queue_head, _holders.lua), so they read no key they
-- did not declare, and a slot's migration moves it with the slot.
--
-- KEYS     the hash
-- ARGV     1 gateway id, 2 ttl_ms
-- Returns  1
-- Fields whose time is over go (a dead gateway's; a page of them a beat
-- once the hash is large, below); the hash lasts as long as its longest
-- liveness.  The same hash keeps sessions' liveness fields
-- outside Redis Cluster (_session.lua: named by a session's token, 22 or
-- more characters, where a gateway's id has 12): such a field is kept
-- LIVE_KEEP_MS past its end, so that a hold found ended after its gateway
-- died still brings its lock-delay.
--@include _layout.lua
--@include _clock.lua
local ttl = ARGV[2] + 0
-- Every live session keeps a field here too, so the hash may hold many
-- thousands: then a beat prunes a page of it (about 1/64, from a bucket
-- the clock picks: HSCAN takes any cursor), not all of it (HGETALL of
-- 10,000 fields is 3 ms of Redis, every beat of every gateway).  Nothing
-- waits for a field to go: each reader compares its value with the clock
-- (gateway_left, live_end); pruning only bounds the hash, so a Redis user
-- whose ACL rule predates HSCAN here (docs/security.md) skips it rather
-- than fail the beat that says this gateway is alive.
local flat
local n = redis.call('HLEN', KEYS[1])
if n <= 256 then
  flat = redis.call('HGETALL', KEYS[1])
else
  local page = redis.pcall('HSCAN', KEYS[1], string.format('%d', now_us % 4294967296), 'COUNT',
                           math.floor(n / 64))
  flat = type(page) == 'table' and not page.err and page[2] or {}
end
local over = {}
for i = 1, #flat, 2 do
  local keep = #flat[i] >= 22 and LIVE_KEEP_MS or 0
  if flat[i + 1] + keep <= now then over[#over + 1] = flat[i] end
end
if #over > 0 then redis.call('HDEL', KEYS[1], unpack(over)) end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', now + ttl))
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1

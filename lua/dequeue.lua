#!lua flags=allow-oom,allow-cross-slot-keys
-- dequeue.lua: a fair waiter gives up (timed out, or its client left).
--
-- KEYS     hash, queue zset, queue deadlines hash, and the liveness hash
--          (_holders.lua, queue_head; in Redis Cluster mode the slot's)
-- ARGV     1 waiter id, 2 channel, 3 message
-- Returns  {removed, dropped}: removed 1 when it was queued, else 0;
-- dropped the entries of dead gateways found ahead of it (_holders.lua).
-- When it was at the head, or dead entries were dropped, the next waiter
-- may now go: that is announced (_holders.lua, THE RULE) so it is woken at
-- once.  ARGV 3 is the message derived from KEYS.
--@include _layout.lua
--@include _clock.lua
--@include _holders.lua
live_channel = ARGV[2]
local head = queue_head(ARGV[1])
local removed = redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if removed == 1 and head == ARGV[1] then announce(KEYS[1]) end
return {removed, queue_dropped}

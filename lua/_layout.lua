-- _layout.lua -- constants of the holder hash (see _holders.lua), included
-- (--@include) first by every script that works on it.

-- A name's last fence is kept this long after its last lease ends (or its
-- last release), so fences grow even when Redis's clock steps back by less.
local FENCE_KEEP_MS = 10000
-- A release leaves the hash to expire by itself unless that is further off
-- than this, when it shortens the expiry to FENCE_KEEP_MS (one PEXPIRE).
local LINGER_MS = 60000
-- A hash without a fence (a semaphore's) is kept this long after its last
-- lease ends, so that the read at that end finds the ended lease
-- (_holders.lua, save_ttl).
local FOUND_MS = 5000
-- Records written by versions before session-bound holds carried their
-- session's lease (_holders.lua, "sessions"): such a holder's lease end is
-- SESSION_EXP, far past any real time, so the fast paths leave it to
-- load(), which reads its session's end; its hash expires at the
-- session's horizon (field h, or the end plus SESSION_HORIZON_MS).  No
-- such record is written any more; the horizon is written again, for
-- live holds (below).
local SESSION_HORIZON_MS = 3600000
local SESSION_EXP = 140737488355328 -- 2^47 ms
-- A session-bound hold outside Redis Cluster (layout 3) is "live": its
-- lease is its session's field in the liveness hash <prefix>gw, valued
-- with the session's end, which the session's renewal moves in one write
-- however many holds it carries (_holders.lua, "sessions").  Its record's
-- lease end is LIVE_EXP, past any real time, so the fast paths leave it
-- to load(), which reads that field.  Its hash lasts at least
-- SESSION_HORIZON_MS past the session's end as last seen, pushed by the
-- renewal that finds the session's horizon (its field h) less than half
-- of that ahead.
local LIVE_EXP = SESSION_EXP + 1
-- A session's liveness field outlives the session's end by the longest
-- lock-delay (60 s, handlers/locks.c), so a hold found ended after its
-- gateway died still brings its lock-delay (lua/liveness.lua).
local LIVE_KEEP_MS = 60000

-- The exclusive holder's record (field x): its token, zero-terminated, then
-- '<I4I7I6I4' count, fence, lease end (ms), ttl (ms), then, only when one is
-- set, '<I6I4' max-hold end (ms), lock-delay (ms) and the owner's bytes.
local X_HEAD = '<sI4I7I6I4'

-- Announces a release.  A channel ending in '}' is a Redis Cluster shard
-- channel in this key's slot (server/redis_cluster.inc: "<prefix>released{
-- <tag of the slot>}"), published with SPUBLISH so that it stays within the
-- shard; any other, the single channel of the other modes, with PUBLISH.
local function publish(channel, message)
  if string.byte(channel, -1) == 125 then
    redis.call('SPUBLISH', channel, message)
  else
    redis.call('PUBLISH', channel, message)
  end
end

-- Publishes a change of holder of the name whose hash is key on the name's
-- own channel, "<prefix>chg:<kind>:<name>", for prefix streams (its
-- message and when it is sent: _holders.lua, "prefix streams").
local function publish_change(key, message)
  local p, k, n = string.match(key, '^(.*)(lock):{([^{]*)}$')
  if not p then p, k, n = string.match(key, '^(.*)(sem):{([^{]*)}$') end
  if p then redis.call('PUBLISH', p .. 'chg:' .. k .. ':' .. n, message) end
end

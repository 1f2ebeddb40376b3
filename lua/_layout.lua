-- _layout.lua -- constants of the holder hash (see _holders.lua), included
-- (--@include) first by every script that works on it.

-- A name's last fence is kept this long after its last lease ends (or its
-- last release), so fences grow even when Redis's clock steps back by less.
local FENCE_KEEP_MS = 10000
-- A release leaves the hash to expire by itself unless that is further off
-- than this, when it shortens the expiry to FENCE_KEEP_MS (one PEXPIRE).
local LINGER_MS = 60000
-- A hash with a session-bound holder expires at the session's horizon (its
-- field h: an end the session has not yet passed, plus this), so Redis drops
-- it by itself once the session is gone.  Renewals move only the session's
-- key until its end comes within half of this of the horizon; that renewal
-- pushes the horizon and every held hash's expiry with it: N keys once per
-- half horizon, not per renewal (session_renew.lua).
local SESSION_HORIZON_MS = 3600000
-- A session-bound holder (attribute s) has no lease of its
-- own: its record's lease end is this, far past any real time, so the fast
-- paths (which read the lease end from the record) see the name as held
-- and leave it to load(), which reads the session's end instead.  (In
-- Redis Cluster mode a bound holder's record carries the session's real
-- end instead, its lease: _holders.lua, "sessions".)
local SESSION_EXP = 140737488355328 -- 2^47 ms

-- The exclusive holder's record (field x): its token, zero-terminated, then
-- '<I4I7I6I4' count, fence, lease end (ms), ttl (ms), then, only when one is
-- set, '<I6I4' max-hold end (ms), lock-delay (ms) and the owner's bytes.
local X_HEAD = '<sI4I7I6I4'

-- Announces a release.  A channel ending in '}' is a Redis Cluster shard
-- channel in this key's slot (server/redis_cluster.inc: "<prefix>released{
-- <tag of the slot>}"), published with SPUBLISH so that it stays within the
-- shard; any other, the single channel of the other modes, with PUBLISH.
-- Prefix streams (watch_prefix.lua) mark the prefixes they watch in one
-- hash, <prefix>pw ("lock:PREFIX" or "sem:PREFIX" -> until, ms).  Outside
-- Redis Cluster every change of holder looks there (_holders.lua,
-- prefix_changes), and the fast paths leave for the general path while it
-- exists.  pw_of: that hash's key for a name's hash key.
local function pw_of(key)
  local p = string.match(key, '^(.*)lock:{') or string.match(key, '^(.*)sem:{') or ''
  return p .. 'pw'
end

local function publish(channel, message)
  if string.byte(channel, -1) == 125 then
    redis.call('SPUBLISH', channel, message)
  else
    redis.call('PUBLISH', channel, message)
  end
end


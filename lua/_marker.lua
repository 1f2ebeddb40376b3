-- _marker.lua -- a grant is refused on a master that lost its data since
-- the gateway last read its marker key (server/lossguard.h), included
-- (--@include) by the scripts that grant (acquire, multi_acquire) after
-- _clock.lua and before anything reads #ARGV.
--
-- The Redis layer appends, when it sends the call, the master's marker
-- key as the last KEY and the value its connection last read there as
-- the last ARGV (server/redis.c, marker_fill).  The value is taken off
-- ARGV here, so the optional trailing arguments keep their places; the
-- key stays last in KEYS, where nothing counts it (a name's keys come
-- first, and the liveness hash is found by name).  An empty value (the
-- gateway has not read the marker yet; Redis Cluster mode, where the key
-- is the call's first key again) checks nothing.
--
-- _marker_check.lua is the check itself, included inline where a fresh
-- hold is about to be created (a local function would be made on every
-- call, fast path or not, and costs Redis as much as a quarter of the
-- check: bench/RESULTS.md).
local MARKER_KEY, MARKER_SEEN = KEYS[#KEYS], ARGV[#ARGV]
ARGV[#ARGV] = nil

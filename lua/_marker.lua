-- _marker.lua -- a grant is refused on a master that lost its data since
-- the gateway last read its marker key (server/lossguard.h), included
-- (--@include) by the scripts that grant (acquire, multi_acquire) before
-- anything reads #KEYS or #ARGV.
--
-- The Redis layer appends, when it sends the call, the master's marker
-- key as the last KEY and the value its connection last read there as
-- the last ARGV (server/redis.c, marker_fill); they are taken off here,
-- so the rest of the script sees its KEYS and ARGV as documented.  An
-- empty value (the gateway has not read the marker yet; Redis Cluster
-- mode, where the key is the call's first key again) checks nothing.
--
-- marker_moved(seed) is called on the path that creates a fresh hold,
-- and only there: a re-entry or a refusal adds no holder, and after a
-- FLUSHALL every grant is fresh.  It answers nil when the marker holds the
-- value the gateway read (the grant goes on), else the marker's value now,
-- which the script answers as {-8, value} (handlers/verdict.h,
-- VERDICT_DATA_LOST) without granting.  A missing marker is set first, to
-- a fresh value of its own (Redis's clock in us and the first characters
-- of seed, the new holder's token: a loss leaves a value no earlier one
-- left), as the gateways' own SETNX would: so every gateway that passes
-- its old value is refused until it has read the new one and noticed the
-- loss, and each counts it once (lossguard.c compares values).  One GET
-- per fresh grant: bench/RESULTS.md.
local MARKER_KEY, MARKER_SEEN = KEYS[#KEYS], ARGV[#ARGV]
KEYS[#KEYS], ARGV[#ARGV] = nil, nil

local function marker_moved(seed)
  if MARKER_SEEN == '' then return nil end
  local v = redis.call('GET', MARKER_KEY)
  if v == MARKER_SEEN then return nil end
  if not v then
    v = string.format('%d', now_us) .. string.sub(seed, 1, 7)
    redis.call('SET', MARKER_KEY, v)
  end
  return v
end

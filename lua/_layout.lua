-- _layout.lua -- constants of the holder hash (see _holders.lua), included
-- (--@include) first by every script that works on it.

-- A name's last fence is kept this long after its last lease ends (or its
-- last release), so fences grow even when Redis's clock steps back by less.
local FENCE_KEEP_MS = 10000
-- A release leaves the hash to expire by itself unless that is further off
-- than this, when it shortens the expiry to FENCE_KEEP_MS (one PEXPIRE).
local LINGER_MS = 60000

-- The exclusive holder's record (field x): its token, zero-terminated, then
-- '<I4I7I6I4' count, fence, lease end (ms), ttl (ms), then, only when one is
-- set, '<I6I4' max-hold end (ms), lock-delay (ms) and the owner's bytes.
local X_HEAD = '<sI4I7I6I4'

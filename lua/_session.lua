-- _session.lua: what session scripts share (included by session_create,
-- session_end.lua, session_renew.lua and session_read.lua only, so that no
-- other script pays for the closures on every call), after _layout.lua
-- and _clock.lua.

-- Outside Redis Cluster the Redis layer declares the liveness hash
-- <prefix>gw after the session's key (server/redis.c, live_key): the
-- session keeps its end there, in a field named by its token, which is
-- the lease of every live hold it carries (_holders.lua, "sessions"),
-- and its field h, the horizon of those holds' hashes, says it does
-- (acquire.lua binds live holds to such a session only).  In Redis
-- Cluster it is not declared (another slot): the holds carry the lease.
local LIVE_HASH = KEYS[2]
-- The session's token, its field's name there.
local TOKEN = string.match(KEYS[1], 'session:{(.*)}$')

-- The session's end e (ms, Redis's clock) and ttl, as its liveness field.
local function live_set(e, ttl)
  if not LIVE_HASH then return end
  redis.call('HSET', LIVE_HASH, TOKEN, string.format('%d', e))
  local keep = ttl + 1 + LIVE_KEEP_MS
  if redis.call('PTTL', LIVE_HASH) < keep then redis.call('PEXPIRE', LIVE_HASH, keep) end
end

-- Whether the session's liveness field still says its end e (as its
-- key's field e has it): an operator's DEL of the liveness hash, or its
-- eviction, ends every live hold the session carries, and the scripts
-- that judged one ended since have let others take its name.  Such a
-- session is lost: renewing it would bring back, unannounced, the holds
-- nobody judged meanwhile, and tell none of their holders of the others.
-- A session that keeps no field (no horizon h: from layout 2) passes.
local function live_intact(e, h)
  if not LIVE_HASH or not h then return true end
  return tonumber(redis.call('HGET', LIVE_HASH, TOKEN) or '0') == tonumber(e)
end

-- A session is owned by the API key that created it (its field 'k'):
-- renewing, reading or ending it needs that key.  who is the caller's key
-- id, or '' when the gateway lets anyone act (keys off, or the caller has
-- admin on every name); a session with no 'k' was made without keys and
-- is anyone's.
local function session_owned_by(k, who)
  return who == '' or not k or k == who
end

-- A session hash's hold fields are the holds' hash keys,
-- "<prefix>lock:{NAME}" or "<prefix>sem:{NAME}" (flat: its HGETALL):
-- appends each hold as "KIND:NAME" and its field's value to out.
local function append_session_holds(flat, out)
  for i = 1, #flat, 2 do
    local k, n = string.match(flat[i], '(lock):{([^{]*)}$')
    if not k then k, n = string.match(flat[i], '(sem):{([^{]*)}$') end
    if k then
      out[#out + 1] = k .. ':' .. n
      out[#out + 1] = flat[i + 1]
    end
  end
end

-- _holders.lua -- the holder hash, included (--@include) by acquire,
-- extend, release, inspect and dequeue after their fast paths and after
-- _clock.lua, so the layout below is written once and its functions are
-- only made when a call leaves its fast path.
--
-- One hash per lock or semaphore (KEYS[1]):
--   x     the exclusive holder: its token and its record (X_HEAD in
--         _layout.lua).  Once that hold ends (released or expired) the
--         record stays as it is, or is rewritten with an empty token, a
--         lease end of 0 and no lock-delay on release: it still carries the
--         name's last fence, so a release is one HSET.
--   <token>  one field per shared holder or semaphore permit (tokens are
--         22+ characters, the other fields are short), its record packed
--         with Redis's struct library: '<I4I7I6I4' count, fence, lease end
--         (ms), ttl (ms): 21 bytes (a permit has no fence: its fence field
--         holds its grant time, Redis's clock in microseconds, which load()
--         keeps out of the name's fences; 0 in a permit granted before
--         that), and only when one is set, '<I6I4'
--         max-hold end (ms), lock-delay (ms) followed by the owner's bytes
--         and the holder's attributes (ATTRS below).
--         Packed, a held lock's hash fits the allocation class of
--         Redisson's RLock hash (bench/RESULTS.md).
--   m     kind of the holders when not exclusive: s shared, p permit
--   lim   a semaphore's limit, as its holders use it
--   dl    lock-delay: nobody may acquire before this time (ms)
--   w     some waiter may wait until this time (ms): changes that can let
--         someone in are announced (THE RULE, below)
--   v     some watcher (GET ?watch_ms, watch.lua) may watch until this time
--         (ms): every change of holder is announced
--   lg    some event stream (watch_log.lua) may read the name's change log
--         until this time (ms): every change of holder is also appended to
--         the log, lq, le and l<n> (see "the change log" below)
--   f     the name's last fence, present only while neither a holder nor
--         the x record carries it (after shared holders end)
--   !<token>  a token a forced release ended (force.lua), valued with the
--         end of the lease it had (ms): until then its extend and release
--         answer "not held" (holder_of), even once somebody else holds the
--         name.  Kept in the hash itself, a key every script on the name
--         declares, so that no script reads a key it did not declare
--         (Redis Cluster refuses that while the slot migrates).
-- Its PEXPIRE covers the longest lease plus its lock-delay, the lock-delay
-- in force and waiters' marks, plus FENCE_KEEP_MS when the name has a fence
-- (else FOUND_MS, _layout.lua),
-- so Redis drops an abandoned lock by itself, and a release by the holder
-- needs no PEXPIRE: the expiry already lies FENCE_KEEP_MS past its lease.

-- Integers as decimal strings (f, dl, w): exact up to 2^53.
local function int(n) return string.format('%d', n) end

-- Per-holder attributes follow the owner's bytes (owners never hold NUL)
-- as "\0" .. <letter> .. <value>, repeated; decode makes each a field of
-- the holder table, and a record without them reads as before.  One row a
-- letter: k the API key id that acquired the hold (server/auth.h), s the
-- session the hold is bound to (its token), a the request attempt that
-- granted its last level (acquire.lua ARGV 15, followed by g: a new hold,
-- or r: a re-entry), so that the same request trying again is answered the
-- grant it has.  Letters this version does not know are kept as they are
-- (attrs).
local ATTRS = {{'k', 'key_id'}, {'s', 'session'}, {'a', 'attempt'}}
local ATTR_FIELD = {k = 'key_id', s = 'session', a = 'attempt'}

local function encode(h)
  local exp = h.live and LIVE_EXP or h.legacy and SESSION_EXP or h.exp
  local rec = struct.pack('<I4I7I6I4', h.count, h.fence, exp, h.ttl)
  local tail = ''
  for _, a in ipairs(ATTRS) do
    local v = h[a[2]]
    if v and v ~= '' then tail = tail .. '\0' .. a[1] .. v end
  end
  if h.attrs then tail = tail .. h.attrs end
  if h.hold == 0 and h.delay == 0 and h.owner == '' and tail == '' then return rec end
  return rec .. struct.pack('<I6I4', h.hold, h.delay) .. h.owner .. tail
end

-- pos: where the record starts in v (after x's token), 1 for a token field.
local function decode(v, pos)
  local h = {hold = 0, delay = 0, owner = ''}
  h.count, h.fence, h.exp, h.ttl, pos = struct.unpack('<I4I7I6I4', v, pos or 1)
  if pos <= #v then
    h.hold, h.delay, pos = struct.unpack('<I6I4', v, pos)
    local rest = string.sub(v, pos)
    local nul = string.find(rest, '\0', 1, true)
    if nul then
      h.owner = string.sub(rest, 1, nul - 1)
      for letter, value in string.gmatch(string.sub(rest, nul), '%z(.)([^%z]*)') do
        local field = ATTR_FIELD[letter]
        if field then
          h[field] = value
        else
          h.attrs = (h.attrs or '') .. '\0' .. letter .. value
        end
      end
    else
      h.owner = rest
    end
  end
  -- A session-bound record is live (its lease is its session's liveness
  -- field), from before (SESSION_EXP: its session's key says), or, with a
  -- real lease end, carries its session's lease itself (Redis Cluster: see
  -- "sessions" below).
  if h.session then
    if h.exp == LIVE_EXP then
      h.live = true
    elseif h.exp == SESSION_EXP then
      h.legacy = true
    else
      h.carried = true
    end
  end
  return h
end

-- ---- sessions -------------------------------------------------------------
-- A session is one hash, <prefix>session:{<token>}: e its end (ms, Redis's
-- clock), t its ttl, d its lock-delay, o its owner, k its API key, and one
-- field per hold it carries (the hold's hash key, valued with the hold's
-- token).  It expires d past e.
--
-- No script on a lock reads a session's key: every script touches only
-- keys it declares (Redis Cluster refuses anything else while a slot
-- migrates; the tests refuse it in every mode, lua/keycheck.lua), and a
-- lock's scripts cannot know its holders' sessions before they read it.
-- A session-bound hold's record's lock-delay is the session's or its
-- own, the longer (acquire.lua reads the session's from its key where it
-- declares it, one master holding both; in Redis Cluster the gateway
-- reads it first).  Its lease is kept in one of two ways:
--
-- Live (h.live; single, Sentinel and quorum mode, layout 3): the session
-- keeps its end in a field of its own, named by its token, in the
-- liveness hash <prefix>gw, which the Redis layer declares for every
-- script that judges holders (server/redis.c, live_key; found by name
-- here, live_end); the record's lease end is LIVE_EXP.  A renewal is one
-- write to the session's key and one to that field, however many holds
-- the session carries (session_renew.lua).  A hash cannot expire with a
-- field of another key, so a live holder's hash lasts SESSION_HORIZON_MS
-- past its session's end as last seen, and never less than it was set to
-- (save_ttl); the renewal that finds the session's horizon less than half
-- of that ahead lists its holds, and the gateway pushes their hashes'
-- expiry (session_slot.lua p): once in half an hour per hold.
--
-- Carried (h.carried; Redis Cluster, where a script on a lock cannot read
-- the one liveness hash, nor a slot's without the gateway renewing it in
-- every slot the session's holds use): the record's lease end is the
-- session's end, and renewals push the new end to every hold, its hash
-- declared (session_slot.lua, handlers/sessions_fan.c), so its expiry is
-- seen in the lock's own hash, like any lease's.
--
-- Records written before either (their lease end SESSION_EXP, _layout.lua;
-- h.legacy) still read their session's end from its key, undeclared: legal
-- on one master or in quorum mode, where they were written, and only
-- until they end (session_state below).
local session_cache = {}

-- The key prefix of a holder hash's key, "<prefix>lock:{...}" or
-- "<prefix>sem:{...}".
local function hash_prefix(hkey)
  return string.match(hkey, '^(.*)lock:{') or string.match(hkey, '^(.*)sem:{') or ''
end

local function session_key(hkey, tok)
  return hash_prefix(hkey) .. 'session:{' .. tok .. '}'
end

-- A record from before carried leases: its session's end, lock-delay and
-- horizon (SESSION_HORIZON_MS; 0, 0, 0 when it is gone).
local function session_state(hkey, tok)
  local c = session_cache[tok]
  if not c then
    local r = redis.call('HMGET', session_key(hkey, tok), 'e', 'd', 'h')
    local e = tonumber(r[1] or '0')
    c = {e, tonumber(r[2] or '0'), tonumber(r[3] or '0')}
    if c[3] == 0 and e > 0 then c[3] = e + SESSION_HORIZON_MS end
    session_cache[tok] = c
  end
  return c[1], c[2], c[3]
end

-- A live record's lease end (ms, Redis's clock): its session's field in
-- the liveness hash beside the holder hash hkey, 0 when it is gone (the
-- session ended, or its gateway stopped renewing it LIVE_KEEP_MS ago).
-- The Redis layer declares that hash for every script that judges
-- holders (a listing reads it as it reads what SCAN finds).
local live_cache = {}
local function live_end(hkey, tok)
  local e = live_cache[tok]
  if not e then
    e = tonumber(redis.call('HGET', hash_prefix(hkey) .. 'gw', tok) or '0')
    live_cache[tok] = e
  end
  return e
end

-- Reads the hash (flat: its HGETALL when the caller has it), drops holders
-- whose lease ended (turning their lock-delay into dl), and sums up who is
-- left.  lastfence is the highest fence the name has given, maxfence the
-- highest a live holder has, xfence the one x's record carries (live or
-- not), ffield the stored f (0 when absent).
local function load(key, flat)
  local st = {holders = {}, alive = 0, maxexp = 0, minexp = 0, dl = 0, w = 0,
              v = 0, lg = 0, le = 0, lq = 0, mode = nil, mfield = nil, limit = 0, first = nil, lastfence = 0,
              maxfence = 0, xfence = 0, ffield = 0, xtoken = nil, tfield = {}, fo = {},
              foexp = 0}
  flat = flat or redis.call('HGETALL', key)
  local dead, dead_x = {}, false
  for i = 1, #flat, 2 do
    local f, v = flat[i], flat[i + 1]
    local hd
    if f == 'x' then
      local tok, pos = struct.unpack('<s', v)
      hd = decode(v, pos)
      st.xfence = hd.fence
      if hd.live then
        hd.exp = live_end(key, hd.session)
      elseif hd.legacy then
        hd.exp, hd.sdelay = session_state(key, hd.session)
        -- Its session ended: x's record becomes an ended one (as a
        -- release leaves it), so the fast paths see the name free.
        if hd.exp <= now and tok ~= '' then
          redis.call('HSET', key, 'x', struct.pack(X_HEAD, '', 0, hd.fence, 0, 0))
          dead_x = true
        end
      end
      if hd.exp > now then
        f, st.xtoken = tok, tok
      elseif tok ~= '' and not dead_x and (not hd.session or hd.live) then
        -- Its lease ended: found once (x becomes an ended record, its
        -- lock-delay kept in dl below), so the end is announced and logged
        -- as a change, once.  (A carried record carries its session's
        -- end, which a renewal may still push: left as it is.  A live
        -- one's session has ended: its renewal is refused.)
        redis.call('HSET', key, 'x', struct.pack(X_HEAD, '', 0, hd.fence, 0, 0))
        dead_x = true
      end
    elseif string.byte(f, 1) == 33 then -- '!': forced out
      local until_ = tonumber(v)
      if until_ > now then
        st.fo[string.sub(f, 2)] = true
        if until_ > st.foexp then st.foexp = until_ end
      else
        dead[#dead + 1] = f
      end
    elseif #f >= 22 then
      hd = decode(v)
      if hd.live then
        hd.exp = live_end(key, hd.session)
      elseif hd.legacy then
        hd.exp, hd.sdelay = session_state(key, hd.session)
      end
      st.tfield[f] = true
    end
    if hd then
      if hd.fence > st.lastfence then st.lastfence = hd.fence end
      if hd.exp <= now then
        if f ~= 'x' then dead[#dead + 1] = f end
        -- A session that ended by expiry brings its own lock-delay.
        local delay = hd.delay
        if hd.sdelay and hd.sdelay > delay then delay = hd.sdelay end
        if delay > 0 and hd.exp + delay > st.dl then st.dl = hd.exp + delay end
      else
        st.holders[f] = hd
        st.alive = st.alive + 1
        if hd.exp > st.maxexp then st.maxexp = hd.exp end
        if hd.fence > st.maxfence then st.maxfence = hd.fence end
        if st.minexp == 0 or hd.exp < st.minexp then st.minexp = hd.exp end
        if not st.first or hd.fence < st.holders[st.first].fence then st.first = f end
      end
    elseif f == 'm' then st.mfield = v
    elseif f == 'lim' then st.limit = tonumber(v)
    elseif f == 'dl' then
      st.dlfield = tonumber(v)
      if st.dlfield > st.dl then st.dl = st.dlfield end
    elseif f == 'w' then
      st.w = tonumber(v)
      st.wfield = st.w
    elseif f == 'v' then
      st.v = tonumber(v)
    elseif f == 'lg' then
      st.lg = tonumber(v)
    elseif f == 'lq' then
      st.lq = tonumber(v)
    elseif f == 'le' then
      st.le = tonumber(v)
    elseif f == 'f' then
      st.ffield = tonumber(v)
      if st.ffield > st.lastfence then st.lastfence = st.ffield end
    end
  end
  -- Permits' fence fields are grant times, not fences: a semaphore has no
  -- fence to keep (st.first stays the longest-held permit).
  if st.mfield == 'p' then st.lastfence, st.maxfence = st.ffield, 0 end
  if #dead > 0 or dead_x then
    -- A dead holder may have carried the last fence: f keeps it.
    if #dead > 0 then redis.call('HDEL', key, unpack(dead)) end
    local keep = {}
    if st.dl > now then
      keep = {'dl', st.dl}
      st.dlfield = st.dl
    end
    if st.lastfence > st.maxfence and st.lastfence > st.xfence and st.ffield ~= st.lastfence then
      keep[#keep + 1], keep[#keep + 2] = 'f', int(st.lastfence)
      st.ffield = st.lastfence
    end
    if #keep > 0 then redis.call('HSET', key, unpack(keep)) end
  end
  if st.alive > 0 then st.mode = st.mfield or 'x' end
  -- What announce_changes compares with: the holders as found, and
  -- whether finding them dropped an ended one (an expiry, a session gone).
  st.before, st.freed = {}, #dead > 0 or dead_x
  for t in pairs(st.holders) do st.before[t] = true end
  return st
end

-- ---- the change log ------------------------------------------------------
-- The name's index for watchers (GET ?watch_ms=&after=, watch.lua): the sum
-- of its live holders' fence fields (a permit's: its grant time in
-- microseconds), modulo 2^52 so that it stays an exact integer; 0 when
-- nobody holds it.  One holder's index is its fence.  Fences only grow and
-- each is given once, so any change of holders (one more, one fewer, one
-- forced out and another in) changes the sum.
local INDEX_MOD = 4503599627370496 -- 2^52
local function index_of(st)
  local sum = 0
  for _, h in pairs(st.holders) do
    local f = h.fence
    if f == 0 then f = 1 end -- a permit from before permits kept their grant time
    sum = (sum + f % INDEX_MOD) % INDEX_MOD
  end
  return sum
end

-- While an event stream watches a name (lg, set by watch_log.lua), every
-- change of its holders is appended, in the script that makes it, to the
-- name's change log, kept in the hash itself (the one key every script on
-- the name declares): lq the last entry's number, le the log's epoch (the
-- time it began, ms: an entry's id is "<le>-<n>", so that ids of a log
-- begun again never match an older one's), and l<n> each entry, the last
-- LOG_KEEP of them.  An entry is the state after the change, as
-- inspect.lua answers it, its fields joined by NUL (owners hold none): u
-- (1: watch_log.lua found the state changed while nothing was logged: the
-- changes before it are lost), holders, count, fence, ttl_ms, kind, limit,
-- index, owner, key_id.  One HSET per change of a watched name (and an
-- HDEL once LOG_KEEP are kept); nothing for the others.  The log goes when
-- lg does (save_ttl).
local LOG_KEEP = 64

-- st as a log entry's fields (below), also a prefix stream's message's.
local function state_fields(st, unlogged)
  local e = {unlogged and 1 or 0, st.alive, 0, 0, 0, 0, 0, 0, '', ''}
  if st.alive > 0 then
    local first, maxfence, maxexp = nil, 0, 0
    for _, h in pairs(st.holders) do
      if not first or h.fence < first.fence then first = h end
      if h.fence > maxfence then maxfence = h.fence end
      if h.exp > maxexp then maxexp = h.exp end
    end
    local kind = st.mfield == 's' and 2 or st.mfield == 'p' and 3 or 1
    if kind == 3 then maxfence = 0 end
    e = {e[1], st.alive, first.count, int(maxfence), int(maxexp - now - 1), kind, st.limit,
         int(index_of(st)), first.owner, first.key_id or ''}
  end
  return e
end

local function log_change(key, st, unlogged)
  local e = state_fields(st, unlogged)
  local n = st.lq + 1
  local set = {'HSET', key, 'l' .. n, table.concat(e, '\0'), 'lq', n}
  if st.le == 0 then
    st.le = now
    set[#set + 1], set[#set + 2] = 'le', int(now)
  end
  redis.call(unpack(set))
  if n > LOG_KEEP then redis.call('HDEL', key, 'l' .. (n - LOG_KEEP)) end
  st.lq = n
  return n
end

-- ---- announcements --------------------------------------------------------
-- THE RULE, kept here so that no script can forget it: a change that can
-- let someone in is announced on the name's release channel when someone
-- may wait there (w) or watch (v), and every change of holder when someone
-- may watch (v).  "Can let someone in": a holder ended (release, forced
-- release, multi release, session end, a lease or session found expired),
-- a permit freed, a fair queue's entry dropped or removed (queue_head,
-- dequeue.lua), and a grant that leaves room (shared, or permits left):
-- the next waiter then enters after it, one wake-up each, without a herd.
-- Scripts never publish themselves: they write holders through put() and
-- end with save_ttl(), which calls announce_changes(); queue_head()
-- announces what it drops.  Gateways wake the first local waiter (and the
-- first fair one, and every watcher) of the name on each announcement
-- (server/waiters.c); one that does not take its turn passes it on there.
--
-- live_channel: this call's release channel.  Scripts that are given one
-- set it first (in Redis Cluster mode it is the slot's shard channel,
-- which cannot be derived); otherwise it is derived from the key,
-- "<prefix>released", the channel of the other modes.  (In Redis Cluster
-- mode nobody listens there: the scripts not given a channel, extend,
-- inspect and watch, can only find a lease already ended, which waiters'
-- timers, set to the lease's end, cover.)
local live_channel = nil

-- Publishes "<kind>:<name>" (handlers/holds.c hold_keys) for hash key.
local function announce(key)
  local p, k, n = string.match(key, '^(.*)(lock):{([^{]*)}$')
  if not p then p, k, n = string.match(key, '^(.*)(sem):{([^{]*)}$') end
  if not p then return end
  publish(live_channel or (p .. 'released'), k .. ':' .. n)
end

-- ---- prefix streams -------------------------------------------------------
-- A prefix stream (GET /v1/locks?prefix=P as an event stream,
-- handlers/prefix_stream.c) is fed by Redis pub/sub patterns, so that no
-- script reads a key it does not declare and nothing is written for it:
-- each change of holder is published, with its state, on the name's own
-- channel "<prefix>chg:<kind>:<name>", and a gateway with a stream over P
-- PSUBSCRIBEs "<prefix>chg:<kind>:P*".  Redis matches every pattern against
-- each PUBLISH: a change costs one PUBLISH plus a match per pattern, and is
-- sent only to the gateways watching a prefix it falls under.  While no
-- client of this Redis has a pattern (PUBSUB NUMPAT is 0, read once a call)
-- nothing is built nor published; the fast paths (acquire of a free name,
-- release by its only holder) make the same check and publish their one
-- state themselves.
-- In Redis Cluster mode NUMPAT is this node's, and PUBLISH reaches every
-- node over the cluster bus: a gateway streaming P holds its pattern on
-- every master and passes on the copy of the name's own master
-- (server/redis_patterns.inc).
-- The message: "<now_us>-<n>" (the event's id: Redis's clock in us and
-- the call's count of such messages, so unique per Redis and the same on
-- every gateway), the change (granted, released, expired, forced,
-- changed: holders both left and joined), then state_fields, then the time
-- left until the earliest lease ends (ms; 0: nobody holds it), joined by
-- NUL.
local patterns = nil
local published = 0

local function prefix_publish(key, st, left, joined, ended)
  if patterns == nil then patterns = redis.call('PUBSUB', 'NUMPAT') end
  if patterns == 0 then return end
  local change = joined and (left and 'changed' or 'granted') or
                 (st.loud and 'forced' or (ended and 'released' or 'expired'))
  published = published + 1
  local first_end = 0 -- the earliest lease end: when the gateway looks again
  for _, h in pairs(st.holders) do
    if first_end == 0 or h.exp < first_end then first_end = h.exp end
  end
  if first_end > 0 then first_end = first_end - now - 1 end
  publish_change(key, int(now_us) .. '-' .. published .. '\0' .. change .. '\0' ..
                 table.concat(state_fields(st, false), '\0') .. '\0' .. int(first_end))
end

-- Announces what changed since load() (or the last call), by the rule
-- above; called by save_ttl, so every script that writes a hash keeps it.
local function announce_changes(key, st)
  local left, joined, ended = st.freed, false, false
  for t in pairs(st.before) do
    if not st.holders[t] then left, ended = true, true end
  end
  for t in pairs(st.holders) do
    if not st.before[t] then joined = true end
  end
  local room = st.alive > 0 and (st.mfield == 's' or (st.mfield == 'p' and st.alive < st.limit))
  local waiting, watched = st.w > now, st.v > now
  -- st.loud (force.lua): a forced release is announced whoever listens,
  -- so that a hold bound to its connection learns it lost (handlers/streams.c).
  if (left and (waiting or watched or st.loud)) or (joined and (watched or (room and waiting))) then
    announce(key)
  end
  if (left or joined) and st.lg > now then log_change(key, st) end
  if left or joined then prefix_publish(key, st, left, joined, ended) end
  st.before, st.freed = {}, false
  for t in pairs(st.holders) do st.before[t] = true end
end

-- Writes a holder's record: the exclusive holder's in x, the others' in
-- their own field.  (A token field of kind x is a record from before x:
-- it moves into x.)
local function put(key, st, token, h, kind)
  if kind == 'x' then
    redis.call('HSET', key, 'x', struct.pack('<s', token) .. encode(h))
    if st.tfield[token] then
      redis.call('HDEL', key, token)
      st.tfield[token] = nil
    end
    st.xtoken, st.xfence = token, h.fence
  else
    redis.call('HSET', key, token, encode(h))
  end
end

-- Sets the hash's expiry to cover every lease with its lock-delay, the
-- lock-delay in force and waiters' marks, FENCE_KEEP_MS more when the name
-- has a fence; deletes it when nothing is left.  Keeps f exactly when
-- neither a holder nor x carries the last fence.
-- gone: a holder field to delete in the same call (a release), or nil.
local function save_ttl(key, st, gone)
  announce_changes(key, st)
  local target, maxfence = st.dl, st.xfence
  -- A live or legacy holder lives as long as its session, which renews
  -- without touching this hash: the hash lasts until the session's
  -- horizon (SESSION_HORIZON_MS), which renewals push ahead of its end
  -- ("sessions" above).
  local live = false
  for _, h in pairs(st.holders) do
    local until_ = h.exp
    if h.live then
      live = true
      until_ = h.exp + SESSION_HORIZON_MS
    elseif h.legacy then
      local _, sdelay, hz = session_state(key, h.session)
      until_ = hz
      if sdelay > h.delay then until_ = hz + sdelay - h.delay end
    end
    if until_ + h.delay > target then target = until_ + h.delay end
    if h.fence > maxfence then maxfence = h.fence end
  end
  if st.w > target then target = st.w end
  if st.v > target then target = st.v end
  if st.lg > target then target = st.lg end
  if st.foexp > target then target = st.foexp end
  if st.lastfence > 0 then
    if now > target then target = now end
    target = target + FENCE_KEEP_MS
  elseif target > now then
    -- No fence (a semaphore): the hash still outlives its last lease by
    -- FOUND_MS, so that a read at that lease's end (a prefix stream's,
    -- handlers/prefix_stream.c) finds it ended and announces it, rather
    -- than finding nothing.
    target = target + FOUND_MS
  end
  if target <= now then
    redis.call('DEL', key)
    return
  end
  local del = {}
  if gone then del[#del + 1] = gone end
  -- A waiter mark or lock-delay gone by is dropped, so the hash can go
  -- back to the fast paths' shape (only x).
  if st.wfield and st.wfield <= now and st.w <= now then del[#del + 1] = 'w' end
  if st.dlfield and st.dlfield <= now then del[#del + 1] = 'dl' end
  if st.v > 0 and st.v <= now then del[#del + 1] = 'v' end
  if st.lg > 0 and st.lg <= now then
    -- Nobody reads the change log any more: it goes with its mark.
    del[#del + 1] = 'lg'
    if st.lq > 0 then
      del[#del + 1], del[#del + 2] = 'lq', 'le'
      for n = math.max(1, st.lq - LOG_KEEP + 1), st.lq do del[#del + 1] = 'l' .. n end
    end
  end
  if st.alive == 0 then
    if st.mfield then del[#del + 1] = 'm' end
    if st.limit > 0 then del[#del + 1] = 'lim' end
  end
  if st.lastfence > maxfence then
    if st.ffield ~= st.lastfence then redis.call('HSET', key, 'f', int(st.lastfence)) end
  elseif st.ffield > 0 then
    del[#del + 1] = 'f'
  end
  if #del > 0 then redis.call('HDEL', key, unpack(del)) end
  if live then
    -- Never nearer than a renewal's push set it: the session's end may
    -- have moved nearer since (a renewal with a shorter ttl), its horizon
    -- not.
    local set = redis.call('PTTL', key)
    if set > target - now then return end
  end
  redis.call('PEXPIRE', key, target - now)
end

-- The token's holder record, or why there is none: -1 nobody holds it,
-- -2 somebody else does.
local function holder_of(st, token)
  local me = st.holders[token]
  if me then return me, nil end
  if st.alive == 0 then return nil, -1 end
  -- A token that a forced release ended holds nothing, even once somebody
  -- else holds the name (force.lua keeps it as a field !<token> for its
  -- lease).
  if st.fo[token] then return nil, -1 end
  return nil, -2
end

-- A lease's end.  `now` is Redis's clock cut to the millisecond, up to
-- 1 ms behind the real moment of the grant; one more millisecond makes sure
-- a lease never ends before grant + ttl_ms, the earliest a client can count
-- from.  Answers report the nominal remaining lease: remaining(exp).
local function cap_exp(h, ttl)
  local exp = now + ttl
  if h.hold > 0 and exp > h.hold then exp = h.hold end
  return exp + 1
end

local function remaining(exp)
  return exp - now - 1
end

local kind_code = {x = 1, s = 2, p = 3}

-- The fair queue: KEYS[2] a sorted set of waiter ids by arrival (Redis
-- microseconds), KEYS[3] a hash of their deadlines.  A waiter id is
-- "<gateway id>.<n>", and each gateway says it is alive in a liveness hash
-- (server/liveness.c, lua/liveness.lua): a field per gateway valued with
-- the end of its liveness (ms, Redis's clock), renewed every third of a
-- short TTL, one field per gateway however many waiters it has.  An entry
-- is dropped when it reaches the head and its deadline has passed or its
-- gateway's field has ended: a waiter whose gateway died or lost Redis
-- holds up the queue for at most that TTL, whatever its wait_ms.  One that
-- gives up is removed at once (dequeue.lua).  queue_dropped counts the
-- entries dropped for a dead gateway, for the gateway's metric.
local queue_dropped = 0

-- KEYS[1] is <prefix><kind>:{<name>}, kind lock or sem (handlers/holds.c
-- hold_keys): its parts, for the keys and the release channel a script
-- derives rather than take as arguments.
local function key_parts()
  local p, k, n = string.match(KEYS[1], '^(.*)(lock):{([^{]*)}$')
  if not p then p, k, n = string.match(KEYS[1], '^(.*)(sem):{([^{]*)}$') end
  return p or '', k or '', n or ''
end

-- How many of KEYS are names' hashes, in a script that takes a list of
-- them: all but the liveness hash the Redis layer appends after them
-- outside Redis Cluster (server/redis.c, live_key; "sessions" above).
local function name_keys()
  local n = #KEYS
  if n > 1 and KEYS[n] == (key_parts()) .. 'gw' then n = n - 1 end
  return n
end

-- How long gateway gw stays alive (ms), -2 when it is gone.  Its liveness
-- is a field of <prefix>gw<tag>, the tag being the one of the call's
-- release channel (live_channel, set before queue_head): in Redis Cluster
-- mode the slot's "{...}", so there is one hash per slot; in the other
-- modes none, so one hash, <prefix>gw (on every master in quorum mode).
-- Every mode's caller declares it among its KEYS (liveness_hash_for), so
-- no script reads a key it did not declare: reading it undeclared is an
-- error here, in every mode, not only a refusal by Redis Cluster while
-- the slot migrates.
local live_hash = nil
local function gateway_left(gw)
  if not live_hash then
    local tag = live_channel and string.match(live_channel, '({[^{}]*})$') or ''
    local want = (key_parts()) .. 'gw' .. tag
    for i = 1, #KEYS do
      if KEYS[i] == want then live_hash = want end
    end
    if not live_hash then error('liveness hash ' .. want .. ' not declared') end
  end
  local until_ = tonumber(redis.call('HGET', live_hash, gw) or '0')
  if until_ <= now then return -2 end
  return until_ - now
end

-- The release channel and message (redis.c, holds.c): ARGV[ci], ARGV[ci+1]
-- when the call carries them, else derived from KEYS[1] (acquire's short
-- form carries none; in Redis Cluster mode it carries the shard channel as
-- ARGV[3], which cannot be derived, and the message is derived).
local function release_channel(ci)
  if ARGV[ci] then return ARGV[ci], ARGV[ci + 1] end
  local p, k, n = key_parts()
  if #ARGV == 3 then return ARGV[3], k .. ':' .. n end -- acquire's cluster short form
  return p .. 'released', k .. ':' .. n
end

-- Returns the head's id and the time its turn ends at the latest: its
-- deadline, or sooner its gateway's key's expiry, when the head would be
-- found dead.  self, the caller's own waiter id, is alive by definition.
-- Ids without a gateway part ("<id>-<n>", or gateways of older versions)
-- have their deadline only.
-- qkey, dkey: another name's queue and deadlines (multi_acquire.lua);
-- KEYS[2], KEYS[3] when nil.
local function queue_head(self, qkey, dkey)
  qkey, dkey = qkey or KEYS[2], dkey or KEYS[3]
  local dropped = false
  -- Entries were dropped and the head is now another waiter, or nobody
  -- (unfair waiters wait while fair ones are queued): they may now go
  -- (THE RULE, above).
  local function head(id, d)
    if dropped and id ~= self then announce(string.sub(qkey, 1, -3)) end
    return id, d
  end
  while true do
    local h = redis.call('ZRANGE', qkey, 0, 0)
    if #h == 0 then return head(nil, 0) end
    local d = tonumber(redis.call('HGET', dkey, h[1]) or '0')
    local gw = h[1] ~= self and string.match(h[1], '^([^.]+)%.')
    local left = -1
    if gw and d > now then
      left = gateway_left(gw)
      if left == -2 then queue_dropped = queue_dropped + 1 end
    end
    if d > now and left ~= -2 then
      if left >= 0 and now + left + 1 < d then d = now + left + 1 end
      return head(h[1], d)
    end
    redis.call('ZREM', qkey, h[1])
    redis.call('HDEL', dkey, h[1])
    dropped = true
  end
end

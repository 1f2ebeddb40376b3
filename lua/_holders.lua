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
--         (ms), ttl (ms): 21 bytes, and only when one is set, '<I6I4'
--         max-hold end (ms), lock-delay (ms) followed by the owner's bytes
--         and the holder's attributes (ATTRS below).
--         Packed, a held lock's hash fits the allocation class of
--         Redisson's RLock hash (bench/RESULTS.md).
--   m     kind of the holders when not exclusive: s shared, p permit
--   lim   a semaphore's limit, as its holders use it
--   dl    lock-delay: nobody may acquire before this time (ms)
--   w     some waiter may wait until this time (ms): releases publish
--   f     the name's last fence, present only while neither a holder nor
--         the x record carries it (after shared holders end)
-- Its PEXPIRE covers the longest lease plus its lock-delay, the lock-delay
-- in force and waiters' marks, plus FENCE_KEEP_MS when the name has a fence,
-- so Redis drops an abandoned lock by itself, and a release by the holder
-- needs no PEXPIRE: the expiry already lies FENCE_KEEP_MS past its lease.

-- Integers as decimal strings (f, dl, w): exact up to 2^53.
local function int(n) return string.format('%d', n) end

-- Per-holder attributes follow the owner's bytes (owners never hold NUL)
-- as "\0" .. <letter> .. <value>, repeated; decode makes each a field of
-- the holder table, and a record without them reads as before.  One row a
-- letter: k the API key id that acquired the hold (server/auth.h).
local ATTRS = {{'k', 'key_id'}}
local ATTR_FIELD = {k = 'key_id'}

local function encode(h)
  local rec = struct.pack('<I4I7I6I4', h.count, h.fence, h.exp, h.ttl)
  local tail = ''
  for _, a in ipairs(ATTRS) do
    local v = h[a[2]]
    if v and v ~= '' then tail = tail .. '\0' .. a[1] .. v end
  end
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
        if field then h[field] = value end
      end
    else
      h.owner = rest
    end
  end
  return h
end

-- Reads the hash (flat: its HGETALL when the caller has it), drops holders
-- whose lease ended (turning their lock-delay into dl), and sums up who is
-- left.  lastfence is the highest fence the name has given, maxfence the
-- highest a live holder has, xfence the one x's record carries (live or
-- not), ffield the stored f (0 when absent).
local function load(key, flat)
  local st = {holders = {}, alive = 0, maxexp = 0, minexp = 0, dl = 0, w = 0,
              mode = nil, mfield = nil, limit = 0, first = nil, lastfence = 0,
              maxfence = 0, xfence = 0, ffield = 0, xtoken = nil, tfield = {}}
  flat = flat or redis.call('HGETALL', key)
  local dead = {}
  for i = 1, #flat, 2 do
    local f, v = flat[i], flat[i + 1]
    local hd
    if f == 'x' then
      local tok, pos = struct.unpack('<s', v)
      hd = decode(v, pos)
      st.xfence = hd.fence
      if hd.exp > now then f, st.xtoken = tok, tok end
    elseif #f >= 22 then
      hd = decode(v)
      st.tfield[f] = true
    end
    if hd then
      if hd.fence > st.lastfence then st.lastfence = hd.fence end
      if hd.exp <= now then
        if f ~= 'x' then dead[#dead + 1] = f end
        if hd.delay > 0 and hd.exp + hd.delay > st.dl then st.dl = hd.exp + hd.delay end
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
    elseif f == 'f' then
      st.ffield = tonumber(v)
      if st.ffield > st.lastfence then st.lastfence = st.ffield end
    end
  end
  if #dead > 0 then
    -- A dead holder may have carried the last fence: f keeps it.
    redis.call('HDEL', key, unpack(dead))
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
  return st
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
  local target, maxfence = st.dl, st.xfence
  for _, h in pairs(st.holders) do
    if h.exp + h.delay > target then target = h.exp + h.delay end
    if h.fence > maxfence then maxfence = h.fence end
  end
  if st.w > target then target = st.w end
  if st.lastfence > 0 then
    if now > target then target = now end
    target = target + FENCE_KEEP_MS
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
  redis.call('PEXPIRE', key, target - now)
end

-- The token's holder record, or why there is none: -1 nobody holds it,
-- -2 somebody else does.
local function holder_of(st, token)
  local me = st.holders[token]
  if me then return me, nil end
  if st.alive == 0 then return nil, -1 end
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
-- "<gateway id>.<n>", and each gateway keeps <prefix>gw:<gateway id> alive
-- with a short TTL (server/liveness.c), one key per gateway however many
-- waiters it has.  An entry is dropped when it reaches the head and its
-- deadline has passed or its gateway's key is gone: a waiter whose gateway
-- died or lost Redis holds up the queue for at most that TTL, whatever its
-- wait_ms.  One that gives up is removed at once (dequeue.lua).
-- queue_dropped counts the entries dropped for a dead gateway, for the
-- gateway's metric.
local queue_dropped = 0

-- <prefix>gw: from KEYS[1], <prefix>lock:{name} or <prefix>sem:{name}
-- (names hold no '{'), so callers pass no extra argument.
-- KEYS[1] is <prefix><kind>:{<name>}, kind lock or sem (handlers/holds.c
-- hold_keys): its parts, for the keys and the release channel a script
-- derives rather than take as arguments.
local function key_parts()
  local p, k, n = string.match(KEYS[1], '^(.*)(lock):{([^{]*)}$')
  if not p then p, k, n = string.match(KEYS[1], '^(.*)(sem):{([^{]*)}$') end
  return p or '', k or '', n or ''
end

local function gateway_key_prefix()
  return (key_parts()) .. 'gw:'
end

-- The release channel and message (redis.c, holds.c): ARGV[ci], ARGV[ci+1]
-- when the call carries them, else derived from KEYS[1] (acquire's short
-- form carries none).
local function release_channel(ci)
  if ARGV[ci] then return ARGV[ci], ARGV[ci + 1] end
  local p, k, n = key_parts()
  return p .. 'released', k .. ':' .. n
end

-- Returns the head's id and the time its turn ends at the latest: its
-- deadline, or sooner its gateway's key's expiry, when the head would be
-- found dead.  self, the caller's own waiter id, is alive by definition.
-- Ids without a gateway part (gateways of older versions) have their
-- deadline only.
local function queue_head(self)
  local gwp = nil
  while true do
    local h = redis.call('ZRANGE', KEYS[2], 0, 0)
    if #h == 0 then return nil, 0 end
    local d = tonumber(redis.call('HGET', KEYS[3], h[1]) or '0')
    local gw = h[1] ~= self and string.match(h[1], '^([^.]+)%.')
    local left = -1
    if gw and d > now then
      gwp = gwp or gateway_key_prefix()
      left = redis.call('PTTL', gwp .. gw)
      if left == -2 then queue_dropped = queue_dropped + 1 end
    end
    if d > now and left ~= -2 then
      if left >= 0 and now + left + 1 < d then d = now + left + 1 end
      return h[1], d
    end
    redis.call('ZREM', KEYS[2], h[1])
    redis.call('HDEL', KEYS[3], h[1])
  end
end

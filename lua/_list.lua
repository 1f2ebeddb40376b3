-- _list.lua -- the body of list.lua and list_cluster.lua (see list.lua),
-- included after _layout.lua, _clock.lua and _holders.lua.
local cursor, pattern, count, what = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local out = {}

local function add_holds(key, flat)
  local entry, mode, limit, alive = {}, 'x', 0, 0
  for i = 1, #flat, 2 do
    local f, v = flat[i], flat[i + 1]
    local h
    if f == 'x' then
      local _, pos = struct.unpack('<s', v)
      h = decode(v, pos)
    elseif #f >= 22 and string.byte(f, 1) ~= 33 then -- not a forced-out token (!)
      h = decode(v)
    elseif f == 'm' then mode = v
    elseif f == 'lim' then limit = tonumber(v)
    end
    -- A session-bound holder lives as long as its session (_holders.lua).
    if h and h.live then
      h.exp = live_end(key, h.session)
    elseif h and h.legacy then
      h.exp = session_state(key, h.session)
    end
    if h and h.exp > now then
      alive = alive + 1
      local n = #entry
      entry[n + 1], entry[n + 2], entry[n + 3] = h.owner, h.key_id or '', h.fence
      entry[n + 4], entry[n + 5], entry[n + 6] = h.count, remaining(h.exp), h.exp - 1 - h.ttl
      -- When it was acquired (ms): a lock's fence is Redis's clock in
      -- microseconds at the grant (or one above the name's last fence), a
      -- permit's fence field its grant time (0 in one from before that).
      entry[n + 7] = math.floor(h.fence / 1000)
    end
  end
  if alive == 0 then return end
  local name = string.match(key, '{([^{]*)}$')
  -- A listing reads what SCAN finds, keys no caller could declare.  The
  -- queue next to a hash found here may be absent, and while its slot
  -- migrates Redis Cluster refuses to read an absent key it was not given:
  -- then the count is 0, as for a queue that is not there.
  local waiting = redis.pcall('ZCARD', key .. ':q')
  if type(waiting) ~= 'number' then waiting = 0 end
  local row = {name, kind_code[mode] or 1, limit, waiting}
  for i = 1, #entry do row[#row + 1] = entry[i] end
  out[#out + 1] = row
end

local function add_ids(key, flat)
  local sec, seq = 0, 0
  for i = 1, #flat, 2 do
    if flat[i] == 'sec' then sec = tonumber(flat[i + 1]) end
    if flat[i] == 'seq' then seq = tonumber(flat[i + 1]) end
  end
  out[#out + 1] = {string.match(key, '{([^{]*)}$'), sec, seq}
end

local r = redis.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', count)
for _, key in ipairs(r[2]) do
  local flat = redis.call('HGETALL', key)
  if what == 'i' then add_ids(key, flat) else add_holds(key, flat) end
end
table.insert(out, 1, r[1])
return out

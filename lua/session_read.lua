-- session_read.lua: a session and the holds it carries.
--
-- KEYS     the session's hash[, the liveness hash (_session.lua)]
-- ARGV     1 the caller's key id ('': anyone's)
-- Returns  {1, ttl_ms, lock_delay_ms, owner, ttl_left_ms, kind:name, token,
--          kind:name, token, ...}   kind lock or sem
--          {-1}                     no such session (ended, expired; or
--                                   its liveness field lost: _session.lua)
--          {-2}                     another key's session (_session.lua)
--@include _layout.lua
--@include _clock.lua
--@include _session.lua
local flat = redis.call('HGETALL', KEYS[1])
local out = {1, 0, 0, '', 0}
local e, k, h = 0, nil, nil
for i = 1, #flat, 2 do
  local f, v = flat[i], flat[i + 1]
  if f == 'e' then e = v + 0
  elseif f == 't' then out[2] = v + 0
  elseif f == 'd' then out[3] = v + 0
  elseif f == 'o' then out[4] = v
  elseif f == 'k' then k = v
  elseif f == 'h' then h = v
  else
    local k, n = string.match(f, '(lock):{([^{]*)}$')
    if not k then k, n = string.match(f, '(sem):{([^{]*)}$') end
    if k then
      out[#out + 1] = k .. ':' .. n
      out[#out + 1] = v
    end
  end
end
if e <= now then return {-1} end
if not session_owned_by(k, ARGV[1]) then return {-2} end
if not live_intact(e, h) then return {-1} end
out[5] = e - now - 1
return out

-- session_read.lua: a session and the holds it carries.
--
-- KEYS     the session's hash
-- Returns  {1, ttl_ms, lock_delay_ms, owner, ttl_left_ms, kind:name, token,
--          kind:name, token, ...}   kind lock or sem
--          {-1}                     no such session (ended, expired)
--@include _clock.lua
local flat = redis.call('HGETALL', KEYS[1])
local out = {1, 0, 0, '', 0}
local e = 0
for i = 1, #flat, 2 do
  local f, v = flat[i], flat[i + 1]
  if f == 'e' then e = v + 0
  elseif f == 't' then out[2] = v + 0
  elseif f == 'd' then out[3] = v + 0
  elseif f == 'o' then out[4] = v
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
out[5] = e - now - 1
return out

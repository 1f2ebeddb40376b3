-- _session.lua: what session scripts share (included by session_end.lua,
-- session_renew.lua and session_read.lua only, so that no other script
-- pays for the closures on every call).

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

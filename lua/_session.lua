-- _session.lua: what session scripts share (included by session_end.lua
-- and session_renew.lua only, so that no other script pays for the
-- closure on every call).

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

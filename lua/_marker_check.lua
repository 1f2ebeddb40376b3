-- _marker_check.lua -- included (--@include) on the path that creates a
-- fresh hold, and only there: a re-entry or a refusal adds no holder, and
-- after a FLUSHALL every grant is fresh (_marker.lua).  When the marker
-- does not hold the value the gateway read, nothing is granted and the
-- answer is {-8, the marker's value now} (handlers/verdict.h,
-- VERDICT_DATA_LOST; the Redis layer notes the loss).  A missing marker is
-- set first, to a fresh value of its own (Redis's clock in us and the
-- first characters of token, the new holder's), as the gateways' own
-- SETNX would: so every gateway that passes the old value is refused
-- until it has read the new one, and each counts the loss once
-- (lossguard.c compares values).  One GET per fresh grant.
-- The gateway keeps a value to its first 24 characters
-- (LOSSGUARD_MARKER_LEN): a longer one, which lockgate never writes (an
-- operator's SET), is compared so far only, or every grant is refused.
if MARKER_SEEN ~= '' then
  local marker = redis.call('GET', MARKER_KEY)
  if marker ~= MARKER_SEEN and (not marker or string.sub(marker, 1, 24) ~= MARKER_SEEN) then
    if not marker then
      marker = string.format('%d', now_us) .. string.sub(token, 1, 7)
      redis.call('SET', MARKER_KEY, marker)
    end
    return {-8, marker}
  end
end

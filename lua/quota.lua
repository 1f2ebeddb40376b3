-- quota.lua: one API key's ledger of holds, for its "holds_at_once" limit
-- (the auth file's "limits"; handlers/quota_holds.c).
--
-- KEYS     1 the key's ledger, a sorted set <prefix>quota:{key:<id>}: its
--          own hash tag, so in Redis Cluster mode the whole count lives in
--          one slot, whatever slots the key's locks lie in; 2 (take with a
--          session, renew, end) the session's set of the ledger's members,
--          <prefix>quota:{key:<id>}:s:<session>, in the same slot
-- Members  one per hold the key has: "<kind>:<name>|<token>" (kind lock or
--          sem; handlers/quota_holds.c)
-- Scores   Redis time (ms) until which the entry counts: the hold's lease
--          end, or later (a session-bound hold's: its session's end).  An
--          entry whose time has passed is pruned on the next take: a hold
--          that ends by expiry leaves the count by itself, with no call
--          from anyone.
--
-- The ledger is written before a grant and trimmed after it, never after
-- alone: a take that finds room enters the hold's member first, then the
-- grant runs (its own script, in its own slot); a grant that does not
-- happen drops the member again.  So the key never holds more than its
-- limit; a take may be refused while another request's entry waits to be
-- dropped, and an entry may outlive its hold (a forced release, a release
-- by another key, a lost answer) up to its score, never longer.
--
-- ARGV 1 the operation:
--   take limit ms session member...
--                             prune, then all or nothing: every member not
--                             yet in the ledger is entered at now + ms (a
--                             re-entry's, already there, is raised to it)
--                             when the count stays within limit; with a
--                             session ('' none) they join its set KEYS[2]
--            -> {1, added}                 added: members entered anew
--            -> {0, retry_after_ms, held}  over the limit: retry_after_ms
--                                          until the first entry lapses
--   set ms member...          members still there count until now + ms
--   drop member...            members leave the ledger
--   renew ms                  the session's members still there count until
--                             now + ms (a session renewed)
--   end                       the session's members leave (a session ended)
--            -> the number of members touched
-- A session's holds may count against several keys (any key with write on
-- a name may bind a hold to a session), so a session has an index of the
-- keys whose ledgers list it, KEYS[1] <prefix>quota:{s:<session>} (its own
-- slot), for its renewal and its end to reach each:
--   index key_id ms           key_id has holds in the session; the index
--                             lives at least ms
--   keys ms                   the key ids, and the index lives ms more, or
--                             (ms < 0) is deleted
--            -> the key ids
local key, op = KEYS[1], ARGV[1]
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)

-- The ledger goes when its last entry lapses.
local function keep_until_last()
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #last == 0 then return end
  local left = tonumber(last[2]) - now
  if left < 1 then left = 1 end
  redis.call('PEXPIRE', key, left)
end

if op == 'take' then
  local limit, ms, session = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
  local until_ = now + ms
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local held, fresh, again = redis.call('ZCARD', key), {}, {}
  for i = 5, #ARGV do
    local s = redis.call('ZSCORE', key, ARGV[i])
    if s then
      if tonumber(s) < until_ then again[#again + 1] = ARGV[i] end
    else
      fresh[#fresh + 1] = ARGV[i]
    end
  end
  if held + #fresh > limit then
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    local after = first[2] and tonumber(first[2]) - now or 1
    if after < 1 then after = 1 end
    return {0, after, held}
  end
  for _, m in ipairs(fresh) do redis.call('ZADD', key, until_, m) end
  for _, m in ipairs(again) do redis.call('ZADD', key, until_, m) end
  if session ~= '' then
    for i = 5, #ARGV do redis.call('SADD', KEYS[2], ARGV[i]) end
    if redis.call('PTTL', KEYS[2]) < ms then redis.call('PEXPIRE', KEYS[2], ms) end
  end
  keep_until_last()
  return {1, #fresh}
elseif op == 'set' then
  local until_, n = now + tonumber(ARGV[2]), 0
  for i = 3, #ARGV do n = n + redis.call('ZADD', key, 'XX', 'CH', until_, ARGV[i]) end
  keep_until_last()
  return n
elseif op == 'drop' then
  local n = 0
  for i = 2, #ARGV do n = n + redis.call('ZREM', key, ARGV[i]) end
  return n
elseif op == 'renew' then
  local ms = tonumber(ARGV[2])
  local n = 0
  for _, m in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    n = n + redis.call('ZADD', key, 'XX', 'CH', now + ms, m)
  end
  if n > 0 then redis.call('PEXPIRE', KEYS[2], ms) end
  keep_until_last()
  return n
elseif op == 'index' then
  local ms = tonumber(ARGV[3])
  redis.call('SADD', key, ARGV[2])
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
  return 1
elseif op == 'keys' then
  local ms, ids = tonumber(ARGV[2]), redis.call('SMEMBERS', key)
  if ms < 0 then
    redis.call('DEL', key)
  elseif #ids > 0 then
    redis.call('PEXPIRE', key, ms)
  end
  return ids
elseif op == 'end' then
  local n = 0
  for _, m in ipairs(redis.call('SMEMBERS', KEYS[2])) do n = n + redis.call('ZREM', key, m) end
  redis.call('DEL', KEYS[2])
  return n
end
return redis.error_reply('quota.lua: unknown operation ' .. tostring(op))

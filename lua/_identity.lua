-- _identity.lua: who this Redis is, for the id era (id_lease.lua): its
-- run_id, new at every start, and its replication id, new at a promotion
-- and its master's while it follows one, so that a restart, a promotion, or
-- a master resynced from another and promoted back is a new identity.
local function redis_identity()
  local info = redis.call('INFO', 'server', 'replication')
  return string.match(info, 'run_id:(%x+)') .. ':' .. string.match(info, 'master_replid:(%x+)')
end

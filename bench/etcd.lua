-- etcd.lua -- wrk: the same acquire/release cycle against etcd's v3 HTTP
-- gateway.  POST /v3/lock/lock {"name": base64(name), "lease": ETCD_LEASE}
-- answers {"key": base64(...)}; POST /v3/lock/unlock {"key": that} gives
-- it back.  The per-thread queue pairs them exactly as locks.lua does (see
-- there); a cycle is 2 requests.  One lease (granted by run.sh) is shared:
-- etcd's lock key is name/<lease id>, distinct because names are.
dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")

local lease = assert(os.getenv("ETCD_LEASE"), "ETCD_LEASE not set")
local bit = require("bit")
local b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local function base64(s)
  local out, n = {}, #s
  for i = 1, n, 3 do
    local a, b, c = s:byte(i, i + 2)
    local v = bit.bor(bit.lshift(a, 16), bit.lshift(b or 0, 8), c or 0)
    out[#out + 1] = b64:sub(bit.rshift(v, 18) + 1, bit.rshift(v, 18) + 1)
    out[#out + 1] = b64:sub(bit.band(bit.rshift(v, 12), 63) + 1, bit.band(bit.rshift(v, 12), 63) + 1)
    out[#out + 1] = b and b64:sub(bit.band(bit.rshift(v, 6), 63) + 1, bit.band(bit.rshift(v, 6), 63) + 1) or "="
    out[#out + 1] = c and b64:sub(bit.band(v, 63) + 1, bit.band(v, 63) + 1) or "="
  end
  return table.concat(out)
end

local queue, head, tail = {}, 1, 0
local counter = 0
local headers = {["Content-Type"] = "application/json"}

function init(args)
  local seed = os.time() + tonumber(tostring({}):match("0x(%x+)"), 16) % 1000003
  math.randomseed(seed)
  prefix = string.format("bench/b%06x%06x-", math.random(0, 0xffffff), math.random(0, 0xffffff))
end

function request()
  if head <= tail then
    local key = queue[head]
    queue[head] = nil
    head = head + 1
    return wrk.format("POST", "/v3/lock/unlock", headers, '{"key":"' .. key .. '"}')
  end
  counter = counter + 1
  return wrk.format("POST", "/v3/lock/lock", headers,
                    '{"name":"' .. base64(prefix .. counter) .. '","lease":"' .. lease .. '"}')
end

function response(status, hdrs, body)
  if status == 200 then
    local key = body:match('"key":"([^"]+)"')
    if key then
      tail = tail + 1
      queue[tail] = key
    end
  end
end

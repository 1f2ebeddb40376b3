-- locks.lua -- wrk: acquire then release locks on random names.
--
-- Every POST /v1/locks/<random name> that is granted leaves (Location,
-- Lock-Token) in a per-thread queue; the next request() of that thread
-- takes one from the queue and releases it with DELETE.  wrk does not tell
-- the script which connection a response came from, and a connection's
-- next request() may run after other connections' responses, so a queue,
-- not a "last token" variable, keeps acquires and releases paired: the
-- requests are POST, DELETE, POST, DELETE... in aggregate, every acquire
-- is released by the next request the thread writes, and no more than one
-- lock per connection is held at a time.  A cycle is 2 requests.
--
-- LOCKS_MODE=acquire: POST only, with LOCKS_TTL_MS (holds locks; used to
-- measure Redis memory per held lock).
dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")

local mode = os.getenv("LOCKS_MODE") or "cycle"
local ttl = os.getenv("LOCKS_TTL_MS") or "30000"
local body = '{"ttl_ms":' .. ttl .. '}'
local queue, head, tail = {}, 1, 0
local counter = 0

function setup(thread)
  thread:set("tid", tostring(thread))
end

function init(args)
  -- distinct per thread and run: a seed from the clock and this state
  local seed = os.time() + tonumber(tostring({}):match("0x(%x+)"), 16) % 1000003
  math.randomseed(seed)
  prefix = string.format("b%06x%06x-", math.random(0, 0xffffff), math.random(0, 0xffffff))
end

local post_headers = {["Content-Type"] = "application/json"}

function request()
  if mode == "cycle" and head <= tail then
    local item = queue[head]
    queue[head] = nil
    head = head + 1
    return wrk.format("DELETE", item[1], {["Lock-Token"] = item[2]}, nil)
  end
  counter = counter + 1
  return wrk.format("POST", "/v1/locks/" .. prefix .. counter, post_headers, body)
end

function response(status, headers, body)
  if mode == "cycle" and status == 201 then
    tail = tail + 1
    queue[tail] = {headers["Location"], headers["Lock-Token"]}
  end
end

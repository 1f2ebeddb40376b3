-- ids_ns.lua -- wrk: POST /v1/ids/<fresh namespace>, every request a
-- namespace never used before (thread t, request k: "ns-t-k"), until
-- NS_TOTAL requests were sent over all threads (NS_THREADS of them); then
-- each thread stops.  Prints "NS sent=N non200=M" per thread, and
-- report.lua's RESULT line.
dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")
local total = tonumber(os.getenv("NS_TOTAL") or "1000000")
local nthreads = tonumber(os.getenv("NS_THREADS") or "2")
local threads, counter = {}, 1

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  quota = math.floor(total / nthreads) + ((id <= total % nthreads) and 1 or 0)
  sent, answered, non200 = 0, 0, 0
  wrk.method = "POST"
end

function request()
  sent = sent + 1
  return wrk.format(nil, string.format("/v1/ids/ns-%d-%d", id, sent))
end

function response(status, headers, body)
  answered = answered + 1
  if status ~= 200 then non200 = non200 + 1 end
  if answered >= quota then wrk.thread:stop() end
end

local base_done = done
function done(summary, latency, requests)
  local s, n = 0, 0
  for _, t in ipairs(threads) do
    s = s + (t:get("answered") or 0)
    n = n + (t:get("non200") or 0)
  end
  io.write(string.format("NS answered=%d non200=%d\n", s, n))
  base_done(summary, latency, requests)
end

-- ids_ns.lua -- wrk: POST /v1/ids/<fresh namespace>, every request a
-- namespace never used before (thread t, request k: "<NS_PREFIX>-t-k",
-- prefix "ns" by default), until NS_TOTAL requests were answered over all
-- threads (NS_THREADS of them); then
-- each thread stops and, when NS_DONE_DIR is set, leaves a file
-- "done-<thread>" there (wrk runs for its -d whatever the threads do, so
-- bench/namespaces.sh interrupts it once all are there).  Prints
-- "NS answered=N non200=M" and report.lua's RESULT line.
dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")
local total = tonumber(os.getenv("NS_TOTAL") or "1000000")
local nthreads = tonumber(os.getenv("NS_THREADS") or "2")
local done_dir = os.getenv("NS_DONE_DIR")
local prefix = os.getenv("NS_PREFIX") or "ns"
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
  return wrk.format(nil, string.format("/v1/ids/%s-%d-%d", prefix, id, sent))
end

function response(status, headers, body)
  answered = answered + 1
  if status ~= 200 then non200 = non200 + 1 end
  if answered == quota then
    if done_dir then
      local f = io.open(done_dir .. "/done-" .. id, "w")
      if f then f:close() end
    end
    wrk.thread:stop()
  end
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

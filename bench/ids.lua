-- ids.lua -- wrk: POST /v1/ids/bench (IDS_COUNT ids per request, default 1).
-- IDS_CHURN=N (optional): every N-th request of a thread asks for a
-- namespace never used before instead, so that a gateway with a small
-- --id-namespaces keeps evicting while "bench" is measured.
dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")
local count = tonumber(os.getenv("IDS_COUNT") or "1")
local churn = tonumber(os.getenv("IDS_CHURN") or "0")
local query = count > 1 and ("?count=" .. count) or ""
wrk.method = "POST"
wrk.path = "/v1/ids/bench" .. query
if os.getenv("IDS_ACCEPT") then wrk.headers["Accept"] = os.getenv("IDS_ACCEPT") end

if churn > 0 then
  local threads = 0
  function setup(thread)
    threads = threads + 1
    thread:set("tid", threads)
  end
  function init(args)
    n, stamp = 0, os.time()
  end
  function request()
    n = n + 1
    if n % churn == 0 then
      return wrk.format(nil, string.format("/v1/ids/churn-%d-%d-%d%s", stamp, tid, n, query))
    end
    return wrk.format(nil, wrk.path)
  end
end

-- ids.lua -- wrk: POST /v1/ids/bench (IDS_COUNT ids per request, default 1).
dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")
local count = tonumber(os.getenv("IDS_COUNT") or "1")
wrk.method = "POST"
wrk.path = count > 1 and ("/v1/ids/bench?count=" .. count) or "/v1/ids/bench"
if os.getenv("IDS_ACCEPT") then wrk.headers["Accept"] = os.getenv("IDS_ACCEPT") end

-- get.lua -- wrk: GET the URL as given (the HTTP ceiling on /healthz).
dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")

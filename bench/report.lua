-- report.lua -- shared by the wrk scripts (loaded with dofile): done()
-- prints one machine-readable line that bench/run.sh parses.
--   RESULT requests=N seconds=S rps=R p50_ms=.. p99_ms=.. max_ms=.. errors=E
-- errors counts connect/read/write/timeout errors and responses >= 400.
function done(summary, latency, requests)
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.timeout + e.status
  local secs = summary.duration / 1e6
  io.write(string.format(
    "RESULT requests=%d seconds=%.3f rps=%.1f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f " ..
    "errors=%d status_errors=%d timeouts=%d\n",
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    errors, e.status, e.timeout))
end

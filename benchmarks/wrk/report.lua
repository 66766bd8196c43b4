-- Shared by the wrk scripts: number the threads (each sees its `thread_id`, so threads send
-- different names), and print the run's figures as one JSON line that server_bench/wrk.py reads.
local threads_made = 0
function setup(thread)
  thread:set("thread_id", threads_made)
  threads_made = threads_made + 1
end

-- Latencies are wrk's, in microseconds, from writing the request to reading the whole response
-- (with Connection: close the TCP connect is not included). errors.status counts non-2xx/3xx.
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d,"mean":%.1f}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max, latency.mean))
end

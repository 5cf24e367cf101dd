-- wrk script for bench_http.sh, the same for musterd, etcd and the ceiling.
--   wrk ... -s bench/wrk.lua URL -- get            GET of the URL's path (one key), static request
--   wrk ... -s bench/wrk.lua URL -- put PREFIX     PUT of distinct keys /v2/keys/bench/put/PREFIX-<n>
-- Values are 64 bytes, sent as a form body like python-etcd does. done() prints one
-- machine-readable line "MU_WRK ..." that bench_http.sh parses.
local mode = "get"
local prefix = "p"
local counter = 0
local body = "value=" .. string.rep("v", 64)
local threads = 0
-- MU_WRK_AUTH: an Authorization value sent with every request (a token's scopes measured)
local auth = os.getenv("MU_WRK_AUTH")

-- Runs in the main state once per thread: a thread id keeps keys distinct with -t > 1.
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

function init(args)
  mode = args[1] or "get"
  prefix = (args[2] or "p") .. "-t" .. tostring(tid or 0)
  if mode == "get" then
    if auth ~= nil and auth ~= "" then
      wrk.headers["Authorization"] = auth
    end
    request = nil -- let wrk prebuild one static request
  elseif mode ~= "put" then
    error("wrk.lua: mode must be get or put, not " .. mode)
  end
end

-- The request's fixed parts are built once: wrk.format() per request cost the client ~10% of its
-- CPU, and with 64 connections the client's speed paces the durable PUT run (bench_durable.sh).
local head, tail
function request()
  if head == nil then
    head = "PUT /v2/keys/bench/put/" .. prefix .. "-"
    tail = " HTTP/1.1\r\nHost: " .. wrk.host .. ":" .. wrk.port ..
      ((auth ~= nil and auth ~= "") and ("\r\nAuthorization: " .. auth) or "") ..
      "\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: " .. #body ..
      "\r\n\r\n" .. body
  end
  counter = counter + 1
  return head .. counter .. tail
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "MU_WRK requests=%d duration_us=%d rps=%.0f p50_us=%d p99_us=%d non2xx=%d sockerr=%d\n",
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), e.status,
    e.connect + e.read + e.write + e.timeout))
end

-- wrk script for the "durable grants over HTTP" figure: POST /v1/customers/{id}/wallet/grants
-- {"amount":1,"reason":"bench"}, each with its own Idempotency-Key (run id, thread, counter), spread
-- over many customers.
--
-- Arguments (after --): <load seconds> <customers> <run id> [first thread number]. Run wrk for longer than <load seconds>:
-- once they have passed, every connection sends an unfinished request instead (the server waits for
-- the rest of its head and never answers it), so no grant is in flight when wrk stops. Every grant the
-- server committed was then answered here, and the 201s counted below must equal the ledger's entries.
-- done() prints "kakin-bench created=… other=…" for kakin-bench to read.

local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } kakin_bench_timespec;
int clock_gettime(int clock_id, kakin_bench_timespec *tp);
]]
local CLOCK_MONOTONIC = 1
local timespec = ffi.new("kakin_bench_timespec")

local function now()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, timespec)
  return tonumber(timespec.tv_sec) + tonumber(timespec.tv_nsec) / 1e9
end

local threads = {}

function setup(thread)
  thread:set("thread_id", #threads)
  table.insert(threads, thread)
end

local body = '{"amount":1,"reason":"bench"}'
local unfinished = "GET /healthz HTTP/1.1\r\nHost: kakin-bench\r\n"

function init(args)
  deadline = now() + tonumber(args[1])
  customers = tonumber(args[2])
  -- Several wrk instances (one per Kakin process) number their threads apart, so each walks its own customers.
  thread_id = thread_id + tonumber(args[4] or "0")
  key_prefix = args[3] .. "-" .. thread_id .. "-"
  counter, created, other = 0, 0, 0
end

function request()
  if now() >= deadline then
    return unfinished
  end
  counter = counter + 1
  local customer = "bench-" .. ((thread_id * 7919 + counter) % customers)
  local headers = { ["Content-Type"] = "application/json", ["Idempotency-Key"] = key_prefix .. counter }
  return wrk.format("POST", "/v1/customers/" .. customer .. "/wallet/grants", headers, body)
end

function response(status, headers, body)
  if status == 201 then
    created = created + 1
  else
    other = other + 1
  end
end

function done(summary, latency, requests)
  local created_total, other_total = 0, 0
  for _, thread in ipairs(threads) do
    created_total = created_total + thread:get("created")
    other_total = other_total + thread:get("other")
  end
  io.write(string.format("kakin-bench created=%d other=%d\n", created_total, other_total))
end

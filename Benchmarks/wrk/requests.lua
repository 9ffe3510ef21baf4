-- wrk script for the figures that send pre-signed requests (purchases, notifications): each request
-- the next line of this thread's file, a line being "<path> <JSON body>", POSTed once (every request
-- different: a new signed transaction or notification each).
--
-- Arguments (after --): <load seconds> <file prefix> <expected status> [first thread number]; thread N
-- reads <file prefix>-N.lines (N counted from the first thread number: several wrk instances, one per
-- Kakin process, read files of their own). Run wrk for longer than <load seconds>: once they have
-- passed, or once the file is used up, every connection sends an unfinished request instead (the
-- server waits for the rest of its head and never answers it), so no request is in flight when wrk
-- stops. done() prints "kakin-bench ok=… other=… loadms=…": ok the answers with the expected status,
-- other every other answer, loadms the longest time a thread was sending.
-- (wrk calls request() once before the run to check the script; that line is never sent.)

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

local headers = { ["Content-Type"] = "application/json" }
local unfinished = "GET /healthz HTTP/1.1\r\nHost: kakin-bench\r\n"

function init(args)
  started = now()
  deadline = started + tonumber(args[1])
  lines = assert(io.open(args[2] .. "-" .. (thread_id + tonumber(args[4] or "0")) .. ".lines"))
  expected = tonumber(args[3])
  ok, other, loadms = 0, 0, 0
end

function request()
  local line = nil
  if loadms == 0 then
    if now() < deadline then line = lines:read("*l") end
    if line == nil then loadms = math.floor((now() - started) * 1000) end
  end
  if line == nil then
    return unfinished
  end
  local space = assert(line:find(" ", 1, true), "a line is <path> <body>")
  return wrk.format("POST", line:sub(1, space - 1), headers, line:sub(space + 1))
end

function response(status, headers, body)
  if status == expected then
    ok = ok + 1
  else
    other = other + 1
  end
end

function done(summary, latency, requests)
  local ok_total, other_total, loadms_max = 0, 0, 0
  for _, thread in ipairs(threads) do
    ok_total = ok_total + thread:get("ok")
    other_total = other_total + thread:get("other")
    loadms_max = math.max(loadms_max, thread:get("loadms"))
  end
  io.write(string.format("kakin-bench ok=%d other=%d loadms=%d\n", ok_total, other_total, loadms_max))
end

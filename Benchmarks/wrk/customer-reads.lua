-- wrk script for the read figures: GET /v1/customers/bench-{n}{suffix} over the seeded customers
-- bench-0 … bench-(customers-1), visited in a scattered order.
-- Arguments (after --): <customers> [suffix], e.g. "1000 /wallet" (wallet reads) or "1000" (status reads).

local threads = {}

function setup(thread)
  thread:set("thread_id", #threads)
  table.insert(threads, thread)
end

function init(args)
  customers = tonumber(args[1])
  suffix = args[2] or ""
  n = thread_id * 104729
end

function request()
  n = n + 1
  return wrk.format("GET", "/v1/customers/bench-" .. ((n * 7919) % customers) .. suffix)
end

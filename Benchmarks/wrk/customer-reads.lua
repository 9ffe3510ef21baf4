-- wrk script for the read figures: GET /v1/customers/bench-{n}{suffix} over the seeded customers
-- bench-{first} … bench-{first+customers-1}, visited in a scattered order.
-- Arguments (after --): <customers> [suffix] [first], e.g. "1000 /wallet" (wallet reads), "1000" (status
-- reads) or "10 '' 10" (status reads of bench-10 … bench-19).

local threads = {}

function setup(thread)
  thread:set("thread_id", #threads)
  table.insert(threads, thread)
end

function init(args)
  customers = tonumber(args[1])
  suffix = args[2] or ""
  first = tonumber(args[3] or "0")
  n = thread_id * 104729
end

function request()
  n = n + 1
  return wrk.format("GET", "/v1/customers/bench-" .. (first + (n * 7919) % customers) .. suffix)
end

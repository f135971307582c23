-- serve_mix.lua - wrk script for bench/serve_load.sh: POST /predict with one-row
-- requests and, every BATCH_EVERY-th request, a 32-row one.
--
--   wrk -s bench/serve_mix.lua http://127.0.0.1:8000 -- one_row.json rows_32.json 8
--
-- The arguments are the two JSON bodies and BATCH_EVERY. Each wrk thread
-- formats both requests once, in init, and then only picks between them.

local one_row, batch, batch_every
local count = 0

local function read_file(path)
  local f = assert(io.open(path, "rb"))
  local body = f:read("*a")
  f:close()
  return body
end

function init(args)
  local headers = { ["Content-Type"] = "application/json" }
  one_row = wrk.format("POST", "/predict", headers, read_file(args[1]))
  batch = wrk.format("POST", "/predict", headers, read_file(args[2]))
  batch_every = tonumber(args[3])
end

function request()
  count = count + 1
  if count % batch_every == 0 then
    return batch
  end
  return one_row
end

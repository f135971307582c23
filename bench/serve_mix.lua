-- serve_mix.lua - wrk script for bench/serve_load.sh: sends whole HTTP requests
-- read from files (bench/serve_requests.py writes them), in turn.
--
--   wrk -s bench/serve_mix.lua http://127.0.0.1:8000 -- json_1.http binary_32.http ...
--
-- Each file holds one request as it goes on the wire (request line, headers,
-- body: JSON or binary tensors alike), so one script sends any mix; a file named
-- twice is sent twice as often. Each wrk thread reads the files once, in init.

local requests = {}
local count = 0

function init(args)
  for i, path in ipairs(args) do
    local f = assert(io.open(path, "rb"))
    requests[i] = f:read("*a")
    f:close()
  end
  assert(#requests > 0, "serve_mix.lua: name one request file or more after --")
end

function request()
  count = count + 1
  return requests[(count - 1) % #requests + 1]
end

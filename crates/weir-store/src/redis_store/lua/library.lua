-- The Redis Functions library's entry points (Redis 7): loaded once, so a call runs
-- only its entry's code, not the definitions above.
--
-- <prefix>: check(keys, argv) of driver.lua, for every shape and mode.
-- <prefix>_<algorithm>: the common shape, one key committed under one policy of that
-- algorithm, decided as check() decides it. args: now in microseconds (or "" for the
-- server's TIME), cost, limit, capacity, period (us), L, P. Returns allowed (0/1),
-- remaining, reset (us), retry (us, -1 for none), delay (us).

local function single(algorithm, queue)
  return function(keys, args)
    local given = args[1]
    local now = clock(given)
    local cost = tonumber(args[2])
    local p = {
      limit = tonumber(args[3]), capacity = tonumber(args[4]), period = tonumber(args[5]),
      L = tonumber(args[6]), P = tonumber(args[7]), queue = queue,
    }
    local key = keys[1]
    local state = redis.call('GET', key)
    local allowed, remaining, reset, retry, delay, kept = decide(algorithm, p, now, cost, state)
    if allowed and cost > 0 then
      redis.call('SET', key, kept, 'PX', expiry_ms(reset, given))
    elseif state and not kept then
      redis.call('DEL', key)
    end
    return { allowed and 1 or 0, remaining, reset, retry, delay }
  end
end

-- Registers the entry points under `prefix`. (Loading a library sees only the `redis`
-- API, not Lua's base functions such as ipairs.)
local function register(prefix)
  redis.register_function(prefix, check)
  local names = {
    'gcra', 'leaky_bucket', 'token_bucket', 'fixed_window', 'sliding_window', 'sliding_log',
  }
  for i = 1, #names do
    local name = names[i]
    redis.register_function(prefix .. '_' .. name, single(algorithm_named(name), name == 'leaky_bucket'))
  end
end

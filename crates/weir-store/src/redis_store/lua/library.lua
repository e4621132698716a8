-- The Redis Functions library's entry points (Redis 7): loaded once, so a call runs
-- only its entry's code, not the definitions above.
--
-- <prefix>: check(keys, argv) of driver.lua, for every shape and mode.
-- <prefix>_<algorithm>: the common shape, one key committed under one policy of that
-- algorithm, decided as check() decides it, with only the numbers the algorithm reads
-- (each costs a parse): now in microseconds (or "" for the server's TIME), cost, then
-- capacity, L, P for the buckets (gcra, leaky_bucket, token_bucket), or limit, period
-- (us) for the windows (whose capacity is their limit), as args.rs sends them (the
-- buckets are the algorithms that take a burst). Returns allowed (0/1), remaining,
-- reset (us), retry (us, -1 for none), delay (us).

-- Writes a committed check's outcome and returns its decision: how every one-check entry
-- ends, as check() ends for one key.
local function commit(key, state, given, cost, allowed, remaining, reset, retry, delay, kept)
  if allowed and cost > 0 then
    -- write_state written out: a Lua call here would cost every check (see fixed_counter).
    if type(kept) == 'table' then
      log_save(key, kept, expiry_ms(reset, given))
    else
      redis.call('SET', key, kept, 'PX', expiry_ms(reset, given))
    end
  elseif state and not kept then
    redis.call('DEL', key)
  end
  return { allowed and 1 or 0, remaining, reset, retry, delay }
end

local function bucket(algorithm, queue)
  return function(keys, args)
    local given, key = args[1], keys[1]
    local now, cost, capacity = clock(given), tonumber(args[2]), tonumber(args[3])
    local state = redis.call('GET', key)
    return commit(key, state, given, cost, decide(algorithm, state, now, cost, nil, capacity,
      nil, tonumber(args[4]), tonumber(args[5]), queue))
  end
end

-- `read`, when given, reads the key's state (log_open for a sliding log); else GET.
local function window(algorithm, read)
  return function(keys, args)
    local given, key = args[1], keys[1]
    local now, cost, limit = clock(given), tonumber(args[2]), tonumber(args[3])
    local state
    if read then state = read(key) else state = redis.call('GET', key) end
    return commit(key, state, given, cost, decide(algorithm, state, now, cost, limit, limit,
      tonumber(args[4])))
  end
end

-- Registers the entry points under `prefix`. (Loading a library sees only the `redis`
-- API, not Lua's base functions such as ipairs.)
local function register(prefix)
  redis.register_function(prefix, check)
  local entries = {
    { 'gcra', bucket(gcra, false) }, { 'leaky_bucket', bucket(gcra, true) },
    { 'token_bucket', bucket(token_bucket, false) }, { 'fixed_window', window(fixed_window) },
    { 'sliding_window', window(sliding_window) }, { 'sliding_log', window(sliding_log, log_open) },
    { 'fixed_counter', window(fixed_counter) }, { 'calendar_counter', window(calendar_counter) },
  }
  for i = 1, #entries do
    redis.register_function(prefix .. '_' .. entries[i][1], entries[i][2])
  end
end

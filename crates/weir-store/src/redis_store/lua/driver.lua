-- The entry point: checks KEYS[i] under the policy in ARGV, all-or-nothing.
--
-- ARGV[1]: now in microseconds since the epoch, or "" to read the server's TIME (one
-- clock for every instance, so skew between instances cannot over-admit).
-- Then 7 arguments per key: algorithm, cost, limit, capacity, period (us), L, P.
-- Returns, flattened: 1 if every check passed, then per key allowed (0/1), remaining,
-- reset (us), retry (us, -1 for none), delay (us).
--
-- A request denied by one check consumes nothing from the others; the checks that
-- passed then report their unchanged state. Each key written gets its expiry in the
-- same step: exactly when its state is full again, rounded up to the millisecond.
local algorithms = {
  fixed_window = fixed_window,
  sliding_window = sliding_window,
  sliding_log = sliding_log,
  token_bucket = token_bucket,
  gcra = gcra,
  leaky_bucket = gcra,
}

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end

local function run(i, cost, state)
  local a = 1 + (i - 1) * 7
  local name = ARGV[a + 1]
  local p = {
    limit = tonumber(ARGV[a + 3]), capacity = tonumber(ARGV[a + 4]),
    period = tonumber(ARGV[a + 5]), L = tonumber(ARGV[a + 6]), P = tonumber(ARGV[a + 7]),
    queue = name == 'leaky_bucket',
  }
  local algorithm = algorithms[name]
  if not algorithm then return redis.error_reply('weir: unknown algorithm ' .. name) end
  if cost > p.capacity then
    -- Can never fit: a peek, denied with no retry time.
    local d = algorithm(state, now, 0, p)
    d.allowed, d.retry, d.delay = false, -1, 0
    return d
  end
  return algorithm(state, now, cost, p)
end

-- stored: each key's state as read; current: as this request leaves it. A state found
-- full again is dropped, as the memory store drops an expired entry when it sees it.
local stored, current, decisions = {}, {}, {}
local all = true
for i, key in ipairs(KEYS) do
  if stored[key] == nil then
    stored[key] = redis.call('GET', key)
    current[key] = stored[key]
  end
  local cost = tonumber(ARGV[1 + (i - 1) * 7 + 2])
  local d = run(i, cost, current[key])
  if d.err then return d end
  decisions[i] = d
  if not d.allowed then
    all = false
  elseif cost > 0 or not d.state then
    current[key] = d.state
  end
end

local reply = { all and 1 or 0 }
for i, key in ipairs(KEYS) do
  local d = decisions[i]
  if not all and d.allowed then
    -- Nothing is consumed: report the state as it was.
    d = run(i, 0, stored[key])
  end
  local last = true
  for j = i + 1, #KEYS do
    if KEYS[j] == key then last = false end
  end
  if last then
    local final = current[key]
    if not all then
      final = d.state and stored[key]
    end
    if final ~= stored[key] then
      if final then
        redis.call('SET', key, final, 'PX', math.max(1, div_ceil(d.reset, 1000)))
      else
        redis.call('DEL', key)
      end
    end
  end
  reply[#reply + 1] = d.allowed and 1 or 0
  reply[#reply + 1] = d.remaining
  reply[#reply + 1] = d.reset
  reply[#reply + 1] = d.retry
  reply[#reply + 1] = d.delay
end
return reply

-- The entry point: checks KEYS[i] under the policy in ARGV, all-or-nothing.
--
-- ARGV[1]: now in microseconds since the epoch, or "" to read the server's TIME (one
-- clock for every instance, so skew between instances cannot over-admit).
-- ARGV[2]: "1" to write the outcome, "0" for a preview that writes nothing.
-- Then 7 arguments per key: algorithm, cost, limit, capacity, period (us), L, P.
-- Returns, flattened: 1 if every check passed, then per key allowed (0/1), remaining,
-- reset (us), retry (us, -1 for none), delay (us).
--
-- A request denied by one check consumes nothing from the others; the checks that
-- passed then report their unchanged state. Each key written gets its expiry in the
-- same step: exactly when its state is full again, rounded up to the millisecond.
local function algorithm_named(name)
  if name == 'gcra' or name == 'leaky_bucket' then return gcra end
  if name == 'token_bucket' then return token_bucket end
  if name == 'fixed_window' then return fixed_window end
  if name == 'sliding_window' then return sliding_window end
  if name == 'sliding_log' then return sliding_log end
  return nil
end

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end

-- Decides check i (of cost `cost`) against `state`; returns the algorithm's values.
local commit = ARGV[2] == '1'

-- The n-th argument (1 to 7) of check i.
local function arg(i, n)
  return ARGV[2 + (i - 1) * 7 + n]
end

local function run(i, cost, state)
  local a = 2 + (i - 1) * 7
  local name = ARGV[a + 1]
  local algorithm = algorithm_named(name)
  if not algorithm then error('weir: unknown algorithm ' .. name) end
  local p = {
    limit = tonumber(ARGV[a + 3]), capacity = tonumber(ARGV[a + 4]),
    period = tonumber(ARGV[a + 5]), L = tonumber(ARGV[a + 6]), P = tonumber(ARGV[a + 7]),
    queue = name == 'leaky_bucket',
  }
  if cost > p.capacity then
    -- Can never fit: a peek, denied with no retry time.
    local _, remaining, reset, _, _, kept = algorithm(state, now, 0, p)
    return false, remaining, reset, -1, 0, kept
  end
  return algorithm(state, now, cost, p)
end

local function expiry_ms(reset)
  return math.max(1, div_ceil(reset, 1000))
end

-- One key, the common case: the same rules as below, without the bookkeeping.
if #KEYS == 1 then
  local key, cost = KEYS[1], tonumber(arg(1, 2))
  local state = redis.call('GET', key)
  local allowed, remaining, reset, retry, delay, kept = run(1, cost, state)
  if not commit then
    -- A preview writes nothing.
  elseif allowed and cost > 0 then
    redis.call('SET', key, kept, 'PX', expiry_ms(reset))
  elseif state and not kept then
    redis.call('DEL', key)
  end
  local flag = allowed and 1 or 0
  return { flag, flag, remaining, reset, retry, delay }
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
  local cost = tonumber(arg(i, 2))
  local d = { run(i, cost, current[key]) }
  decisions[i] = d
  if not d[1] then
    all = false
  elseif cost > 0 or not d[6] then
    current[key] = d[6]
  end
end

local reply = { all and 1 or 0 }
for i, key in ipairs(KEYS) do
  local d = decisions[i]
  if commit and not all and d[1] then
    -- Nothing is consumed: report the state as it was.
    d = { run(i, 0, stored[key]) }
  end
  local last = true
  for j = i + 1, #KEYS do
    if KEYS[j] == key then last = false end
  end
  if commit and last then
    local final = current[key]
    if not all then
      final = d[6] and stored[key]
    end
    if final ~= stored[key] then
      if final then
        redis.call('SET', key, final, 'PX', expiry_ms(d[3]))
      else
        redis.call('DEL', key)
      end
    end
  end
  reply[#reply + 1] = d[1] and 1 or 0
  reply[#reply + 1] = d[2]
  reply[#reply + 1] = d[3]
  reply[#reply + 1] = d[4]
  reply[#reply + 1] = d[5]
end
return reply

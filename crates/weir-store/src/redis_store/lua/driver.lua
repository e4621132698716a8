-- The general entry point: check(keys, argv) checks keys[i] under the policy in argv,
-- all-or-nothing. A function, not the script's body, so that a Redis Functions library
-- defines it once at load (see library.lua); the script ends with
-- `return check(KEYS, ARGV)`.
--
-- argv[1]: now in microseconds since the epoch, or "" to read the server's TIME (one
-- clock for every instance, so skew between instances cannot over-admit).
-- argv[2]: the mode: "1" to write the outcome, "0" for a preview that writes nothing,
-- "2" to refund each key's cost instead (weir-core's `refund`, in order), "3" to
-- decide as a commit that another check denied: nothing is written and the checks
-- that pass report their unchanged state (for the slots of a Redis Cluster that a
-- denial elsewhere kept from committing).
-- "9" charges each key's cost past its limit where its algorithm carries a debt
-- (weir-core's `charge`, in order).
-- "10" writes a settlement once (see settle below).
-- "4" and "5" take a lease and give one back (lease.lua, whose arguments differ);
-- "6", "7" and "8" report, apply and renew a region's share (share.lua).
-- Then 7 arguments per key: algorithm, cost, limit, capacity, period (us), L, P.
-- Returns, flattened: 1 if every check passed, then per key allowed (0/1), remaining,
-- reset (us), retry (us, -1 for none), delay (us). A refund returns, per key, what a
-- peek (cost 0) reports after it.
--
-- A request denied by one check consumes nothing from the others; the checks that
-- passed then report their unchanged state. Each key written gets its expiry in the
-- same step: exactly when its state is full again, rounded up to the millisecond (a
-- second later with the instances' clocks, see expiry_ms).
local function algorithm_named(name)
  if name == 'gcra' or name == 'leaky_bucket' then return gcra, gcra_refund end
  if name == 'token_bucket' then return token_bucket, token_bucket_refund end
  if name == 'fixed_window' then return fixed_window, fixed_window_refund end
  if name == 'fixed_counter' then return fixed_counter, fixed_counter_refund end
  if name == 'calendar_counter' then return calendar_counter, calendar_counter_refund end
  if name == 'sliding_window' then return sliding_window, sliding_window_refund end
  if name == 'sliding_log' then return sliding_log, sliding_log_refund end
  if name == 'regional' then return regional, regional_refund end
  return nil
end

-- The n-th argument (1 to 7) of check i.
local function arg(argv, i, n)
  return argv[2 + (i - 1) * 7 + n]
end

-- A key's state as check i's algorithm reads it: a sliding log's view (read a record
-- at a time, see sliding_log.lua), every other state whole.
local function read_state(argv, i, key)
  if arg(argv, i, 1) == 'sliding_log' then return log_open(key) end
  return redis.call('GET', key)
end

-- Writes a state to keep, with its expiry in milliseconds (a region's share record
-- lives at least until its deadline, see share.lua).
local function write_state(key, kept, px, now)
  if type(kept) == 'table' then
    log_save(key, kept, px)
  else
    redis.call('SET', key, kept, 'PX', regional_px(kept, px, now))
  end
end

-- The time in microseconds: `given`, or the server's TIME when it is "".
local function clock(given)
  if given == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return tonumber(given)
end

-- With the instances' clocks (a time given), a key lives a second past the end of its
-- state: Redis expires keys by its own clock, and a state kept a little longer decides
-- exactly as no state, while one dropped early by a clock running ahead would forget
-- counts.
local function expiry_ms(reset, given)
  local margin = 1000
  if given == '' then margin = 0 end
  return math.max(1, div_ceil(reset, 1000)) + margin
end

-- Decides a check of cost `cost` against `state` under a policy (see prelude.lua);
-- returns the algorithm's values.
local function decide(algorithm, state, now, cost, limit, capacity, period, L, P, queue)
  if cost > capacity then
    -- Can never fit: a peek, denied with no retry time.
    local _, remaining, reset, _, _, kept =
      algorithm(state, now, 0, limit, capacity, period, L, P, queue)
    return false, remaining, reset, -1, 0, kept
  end
  return algorithm(state, now, cost, limit, capacity, period, L, P, queue)
end

-- Check i's algorithm, its refund, and its policy: limit, capacity, period, L, P, queue.
local function policy(argv, i)
  local name = arg(argv, i, 1)
  local algorithm, refund = algorithm_named(name)
  if not algorithm then error('weir: unknown algorithm ' .. name) end
  return algorithm, refund, tonumber(arg(argv, i, 3)), tonumber(arg(argv, i, 4)),
    tonumber(arg(argv, i, 5)), tonumber(arg(argv, i, 6)), tonumber(arg(argv, i, 7)),
    name == 'leaky_bucket'
end

-- Decides check i (of cost `cost`) against `state` at `now`.
local function run(argv, i, now, cost, state)
  local algorithm, _, limit, capacity, period, L, P, queue = policy(argv, i)
  return decide(algorithm, state, now, cost, limit, capacity, period, L, P, queue)
end

-- Whether check i is the last on its key (the one whose state is written).
local function last(keys, i)
  for j = i + 1, #keys do
    if keys[j] == keys[i] then return false end
  end
  return true
end

-- Appends a decision's five values to the reply.
local function push(reply, allowed, remaining, reset, retry, delay)
  reply[#reply + 1] = allowed and 1 or 0
  reply[#reply + 1] = remaining
  reply[#reply + 1] = reset
  reply[#reply + 1] = retry
  reply[#reply + 1] = delay
end

-- Updates each key in order by `step(argv, i, state, now)`, which returns the state to
-- keep (false once full) and its reset, or nil to leave it; writes each key's last
-- state and replies, per key, what a peek (cost 0) reports after it.
local function update_all(keys, argv, now, step)
  local stored, current, reset = {}, {}, {}
  for i, key in ipairs(keys) do
    if stored[key] == nil then
      stored[key] = read_state(argv, i, key)
      current[key] = stored[key]
    end
    local kept, after = step(argv, i, current[key], now)
    if kept ~= nil then current[key], reset[key] = kept, after end
  end
  local reply = { 1 }
  for i, key in ipairs(keys) do
    if last(keys, i) and current[key] ~= stored[key] then
      if current[key] then
        write_state(key, current[key], expiry_ms(reset[key], argv[1]), now)
      else
        redis.call('DEL', key)
      end
    end
    push(reply, run(argv, i, now, 0, current[key]))
  end
  return reply
end

-- A refund: each key gives back its cost, in order; a key with nothing counted stays
-- absent. A cost of 0, or above the capacity (never consumed), gives nothing back.
local function refund_step(argv, i, state, now)
  local _, refund, limit, capacity, period, L, P, queue = policy(argv, i)
  local cost = tonumber(arg(argv, i, 2))
  if state and cost > 0 and cost <= capacity then
    return refund(state, now, cost, limit, capacity, period, L, P, queue)
  end
  return nil
end

-- One key: the same rules as check_all, without the bookkeeping.
local function check_one(key, argv, now, commit, refused)
  local cost = tonumber(arg(argv, 1, 2))
  local state = read_state(argv, 1, key)
  local allowed, remaining, reset, retry, delay, kept = run(argv, 1, now, cost, state)
  if refused and allowed then
    allowed, remaining, reset, retry, delay = run(argv, 1, now, 0, state)
  elseif not commit then
    -- A preview writes nothing.
  elseif allowed and cost > 0 then
    write_state(key, kept, expiry_ms(reset, argv[1]), now)
  elseif state and not kept then
    redis.call('DEL', key)
  end
  local reply = { allowed and 1 or 0 }
  push(reply, allowed, remaining, reset, retry, delay)
  return reply
end

-- Several keys. stored: each key's state as read; current: as this request leaves it.
-- A state found full again is dropped, as the memory store drops an expired entry when
-- it sees it.
local function check_all(keys, argv, now, commit, refused)
  local stored, current, decisions = {}, {}, {}
  local all = true
  for i, key in ipairs(keys) do
    if stored[key] == nil then
      stored[key] = read_state(argv, i, key)
      current[key] = stored[key]
    end
    local cost = tonumber(arg(argv, i, 2))
    local d = { run(argv, i, now, cost, current[key]) }
    decisions[i] = d
    if not d[1] then
      all = false
    elseif cost > 0 or not d[6] then
      current[key] = d[6]
    end
  end

  local reply = { all and 1 or 0 }
  for i, key in ipairs(keys) do
    local d = decisions[i]
    if (refused or commit and not all) and d[1] then
      -- Nothing is consumed: report the state as it was.
      d = { run(argv, i, now, 0, stored[key]) }
    end
    if commit and last(keys, i) then
      local final = current[key]
      if not all then
        final = d[6] and stored[key]
      end
      if final ~= stored[key] then
        if final then
          write_state(key, final, expiry_ms(d[3], argv[1]), now)
        else
          redis.call('DEL', key)
        end
      end
    end
    push(reply, d[1], d[2], d[3], d[4], d[5])
  end
  return reply
end

-- The charge function of a bucket algorithm (a debt is a time), or nil.
local function charger_named(name)
  if name == 'gcra' or name == 'leaky_bucket' then return gcra_charge end
  if name == 'token_bucket' then return token_bucket_charge end
  return nil
end

-- A charge: each key takes its cost (at most its capacity) whether or not it is left,
-- in order; an algorithm that cannot carry a debt takes it only where a check would
-- allow it.
local function charge_step(argv, i, state, now)
  local algorithm, _, limit, capacity, period, L, P, queue = policy(argv, i)
  local cost = math.min(tonumber(arg(argv, i, 2)), capacity)
  local charge = charger_named(arg(argv, i, 1))
  if cost > 0 and charge then
    return charge(state, now, cost, limit, capacity, period, L, P, queue)
  elseif cost > 0 then
    local allowed, _, after, _, _, kept = decide(algorithm, state, now, cost, limit, capacity, period, L, P, queue)
    if allowed then return kept, after end
  end
  return nil
end

-- A request's settlement, written at most once (mode "10"): keys are the checks' keys,
-- then the settlement's id key (same slot); after the checks' arguments, argv holds how
-- many of the checks are refunds (the first ones; the rest are charges) and how long
-- the id is remembered (ms). The id key is set first, only if absent, in the same step
-- as the writes: an id already there means an earlier try was written (its answer was
-- lost), and nothing is written again. Returns { 1 } when written, { 0 } when not.
local function settle(keys, argv, now)
  local n = #keys - 1
  if not redis.call('SET', keys[n + 1], '1', 'NX', 'PX', argv[4 + n * 7]) then
    return { 0 }
  end
  local refunds = tonumber(argv[3 + n * 7])
  local checks = {}
  for i = 1, n do checks[i] = keys[i] end
  update_all(checks, argv, now, function(a, i, state, t)
    if i <= refunds then return refund_step(a, i, state, t) end
    return charge_step(a, i, state, t)
  end)
  return { 1 }
end

-- Defined in lease.lua, which comes after this file (it uses decide and expiry_ms).
local lease_take, lease_give_back

local function check(keys, argv)
  local now = clock(argv[1])
  local mode = argv[2]
  if mode == '2' then return update_all(keys, argv, now, refund_step) end
  if mode == '9' then return update_all(keys, argv, now, charge_step) end
  if mode == '10' then return settle(keys, argv, now) end
  if mode == '4' then return lease_take(keys, argv, now) end
  if mode == '5' then return lease_give_back(keys, argv, now) end
  if mode == '6' then return share_report(keys, argv, now) end
  if mode == '7' then return share_apply(keys, argv, now) end
  if mode == '8' then return share_renew(keys, argv, now) end
  if #keys == 1 then return check_one(keys[1], argv, now, mode == '1', mode == '3') end
  return check_all(keys, argv, now, mode == '1', mode == '3')
end

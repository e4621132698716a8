-- fixed_window: a counter per window of `period`, windows aligned to the epoch.
-- State "f:start:count". Mirrors weir-core's fixed_window.rs.
local function fixed_window(state, now, cost, limit, _, period)
  state = tagged(state, 'f')
  local _, offset = divmod(now, period)
  local window = now - offset
  local start, count = window, 0
  if state then
    local s = numbers(state)
    if s[1] >= window then
      -- The same window, or a clock that went backwards: stay in the stored one.
      start, count = s[1], s[2]
    end
  end
  local allowed = count + cost <= limit
  if allowed then count = count + cost end
  local until_next = start + period - now
  local reset, retry, kept = 0, -1, false
  if count > 0 then
    reset = until_next
    kept = 'f:' .. int(start) .. ':' .. int(count)
  end
  if not allowed then retry = until_next end
  return allowed, limit - count, reset, retry, 0, kept
end

-- Takes `cost` off the count while the stored window is current (or later: a clock
-- that went backwards); a rolled window's units have expired, nothing is given.
local function fixed_window_refund(state, now, cost, limit, capacity, period)
  local s = tagged(state, 'f')
  if s then
    s = numbers(s)
    local _, offset = divmod(now, period)
    if now - offset <= s[1] then s[2] = s[2] - math.min(cost, s[2]) end
    state = 'f:' .. int(s[1]) .. ':' .. int(s[2])
  end
  return settled(fixed_window, state, now, limit, capacity, period)
end

-- fixed_counter: the fixed window kept in counters (counter.rs): a bare count under a
-- key named after its window (keys.rs), so that the common check, one unit, is INCRBY
-- + PEXPIRE without Lua. INCRBY counts a denied unit too, as envoy does: the count is
-- the units admitted plus those denied once the window was full. Several units,
-- refunds, previews and layered checks come here and read the same count; until a
-- unit is denied they decide as fixed_window does within one window.
local function counted(state)
  return math.max(0, tonumber(state) or 0)
end

-- Written out rather than sharing a decision function with fixed_window: a Lua
-- function call there costs every default fixed-window check about 2,000 more
-- instructions in Redis (3%, bench/redis_instructions.sh).
local function fixed_counter(state, now, cost, limit, _, period)
  local count = counted(state)
  local _, offset = divmod(now, period)
  -- A count above the limit is a full window (denied units): a peek still passes.
  local allowed = math.min(count, limit) + cost <= limit
  if allowed then count = count + cost end
  local until_next = period - offset
  local reset, retry, kept = 0, -1, false
  if count > 0 then
    reset = until_next
    kept = int(count)
  end
  if not allowed then retry = until_next end
  return allowed, math.max(0, limit - count), reset, retry, 0, kept
end

local function fixed_counter_refund(state, now, cost, limit, capacity, period)
  local count = counted(state)
  count = count - math.min(cost, count)
  return settled(fixed_counter, int(count), now, limit, capacity, period)
end

-- calendar_counter: a fixed window that follows a calendar (a month in a time zone),
-- kept as a bare count under a key named after the window's start (keys.rs). The
-- instance works out the window and passes its end (us) in the period's place; Redis
-- only counts. Decides as weir-core's fixed_window.rs within one window: the reset is
-- the time to that end, by the clock that decides (never below 0: a server clock
-- already past the instance's boundary says the window is over).
local function calendar_counter(state, now, cost, limit, _, finish)
  local count = counted(state)
  local allowed = count + cost <= limit
  if allowed then count = count + cost end
  local until_next = math.max(0, finish - now)
  local reset, retry, kept = 0, -1, false
  if count > 0 then
    reset = until_next
    kept = int(count)
  end
  if not allowed then retry = until_next end
  return allowed, math.max(0, limit - count), reset, retry, 0, kept
end

-- Takes `cost` off the window's count: the key is the window's, so the units are
-- still counted there (a window that has ended is another key).
local function calendar_counter_refund(state, now, cost, limit, capacity, finish)
  local count = counted(state)
  count = count - math.min(cost, count)
  return settled(calendar_counter, int(count), now, limit, capacity, finish)
end

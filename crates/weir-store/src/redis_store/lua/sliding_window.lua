-- sliding_window: previous and current fixed windows' counts; the estimate
-- previous * (period - elapsed) / period + current must stay within the limit.
-- State "w:start:previous:current". Mirrors weir-core's sliding_window.rs.
local function sliding_window(state, now, cost, limit, _, period)
  state = tagged(state, 'w')
  local _, offset = divmod(now, period)
  local window = now - offset
  local start, previous, current = window, 0, 0
  if state then
    local s = numbers(state)
    if s[1] >= window then
      start, previous, current = s[1], s[2], s[3]
    elseif window - s[1] == period then
      previous = s[3]
    end
  end
  -- Before the stored window, the clock went backwards: weigh as if no time had
  -- passed (waits still count from now).
  local at = now
  if start > at then at = start end
  local elapsed = at - start
  local function scaled(c) return previous * (period - elapsed) + c * period end
  local allowed = scaled(current + cost) <= limit * period
  if allowed then current = current + cost end
  local remaining = limit - div_ceil(scaled(current), period)
  if remaining < 0 then remaining = 0 end
  local reset = 0
  if current > 0 then
    reset = start + 2 * period - now
  elseif previous > 0 then
    reset = start + period - now
  end
  local retry = -1
  if not allowed then
    local function first_fit(from, weighted, room)
      if weighted == 0 then return from end
      local keep = divmod(room * period, weighted)
      if keep > period then keep = period end
      return from + period - keep
    end
    local at
    if current + cost <= limit then
      at = first_fit(start, previous, limit - current - cost)
    else
      at = first_fit(start + period, current, limit - cost)
    end
    retry = at - now
  end
  local kept = false
  if reset > 0 then
    kept = 'w:' .. int(start) .. ':' .. int(previous) .. ':' .. int(current)
  end
  return allowed, remaining, reset, retry, 0, kept
end

-- Takes `cost` off the newest stored window's count, whatever the time (see
-- weir-core's sliding_window.rs for the approximation at a boundary).
local function sliding_window_refund(state, now, cost, ...)
  local s = tagged(state, 'w')
  if s then
    s = numbers(s)
    s[3] = s[3] - math.min(cost, s[3])
    state = 'w:' .. int(s[1]) .. ':' .. int(s[2]) .. ':' .. int(s[3])
  end
  return settled(sliding_window, state, now, ...)
end

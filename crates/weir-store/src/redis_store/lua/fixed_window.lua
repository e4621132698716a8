-- fixed_window: a counter per window of `period`, windows aligned to the epoch.
-- State "f:start:count". Mirrors weir-core's fixed_window.rs.
local function fixed_window(state, now, cost, p)
  state = tagged(state, 'f')
  local _, offset = divmod(now, p.period)
  local window = now - offset
  local start, count = window, 0
  if state then
    local s = numbers(state)
    if s[1] >= window then
      -- The same window, or a clock that went backwards: stay in the stored one.
      start, count = s[1], s[2]
    end
  end
  local allowed = count + cost <= p.limit
  if allowed then count = count + cost end
  local until_next = start + p.period - now
  local reset, retry, kept = 0, -1, false
  if count > 0 then
    reset = until_next
    kept = 'f:' .. int(start) .. ':' .. int(count)
  end
  if not allowed then retry = until_next end
  return allowed, p.limit - count, reset, retry, 0, kept
end

-- sliding_log: "l:" then every admitted request as "time:cost", oldest first, comma
-- separated;
-- a request counts until time + period. At most `limit` entries (limit <= 10,000), so
-- every loop here is bounded. Mirrors weir-core's sliding_log.rs.
local function sliding_log(state, now, cost, limit, _, period)
  state = tagged(state, 'l')
  local entries = {}
  if state then
    for at, c in string.gmatch(state, '(%d+):(%d+)') do
      entries[#entries + 1] = { tonumber(at), tonumber(c) }
    end
  end
  -- Before the newest entry, the clock went backwards: trim as if no time had passed
  -- (waits still count from now).
  local at = now
  local newest = entries[#entries]
  if newest and newest[1] > at then at = newest[1] end
  local live, total = {}, 0
  for _, e in ipairs(entries) do
    if e[1] + period > at then
      live[#live + 1] = e
      total = total + e[2]
    end
  end
  local allowed = total + cost <= limit
  if allowed and cost > 0 then
    local last = live[#live]
    if last and last[1] == at then
      last[2] = last[2] + cost
    else
      live[#live + 1] = { at, cost }
    end
    total = total + cost
  end
  local reset = 0
  if #live > 0 then reset = live[#live][1] + period - now end
  local retry = -1
  if not allowed then
    local must_free, freed = total + cost - limit, 0
    for _, e in ipairs(live) do
      freed = freed + e[2]
      if freed >= must_free then
        retry = e[1] + period - now
        break
      end
    end
  end
  local kept = false
  if #live > 0 then
    local parts = {}
    for i, e in ipairs(live) do parts[i] = int(e[1]) .. ':' .. int(e[2]) end
    kept = 'l:' .. table.concat(parts, ',')
  end
  return allowed, limit - total, reset, retry, 0, kept
end

-- Takes `cost` units off the newest entries (see weir-core's sliding_log.rs for what
-- that means when other requests came after the reservation).
local function sliding_log_refund(state, now, cost, ...)
  local s = tagged(state, 'l')
  if s then
    local entries = {}
    for at, c in string.gmatch(s, '(%d+):(%d+)') do
      entries[#entries + 1] = { at, tonumber(c) }
    end
    local left = cost
    while left > 0 and #entries > 0 do
      local newest = entries[#entries]
      local taken = math.min(left, newest[2])
      newest[2] = newest[2] - taken
      left = left - taken
      if newest[2] == 0 then entries[#entries] = nil end
    end
    local parts = {}
    for i, e in ipairs(entries) do parts[i] = e[1] .. ':' .. int(e[2]) end
    state = 'l:' .. table.concat(parts, ',')
  end
  return settled(sliding_log, state, now, ...)
end

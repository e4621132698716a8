-- gcra and leaky_bucket: the theoretical arrival time, in microseconds plus a
-- remainder in ticks of 1/L microsecond (L = limit / gcd(limit, period)); one unit of
-- cost is P ticks (P = period / gcd). State "tat" or "tat:remainder", so a policy whose
-- period divides evenly keeps a single integer. Mirrors weir-core's gcra.rs.
local function gcra(state, now, cost, p)
  local L, P = p.L, p.P
  local tolerance = p.capacity * P
  local queued = 0
  -- A state of another algorithm is tagged with a letter: none of GCRA's.
  if state and string.find(state, '^%d') then
    local s = numbers(state)
    if s[1] >= now then
      -- A clock so far behind the state that the ticks would leave the exact range of
      -- doubles (2^53) is denied anyway; keep it within range.
      if s[1] - now > 4503599627370496 / L then
        queued = 4503599627370496
      else
        queued = (s[1] - now) * L + (s[2] or 0)
      end
    end
  end
  local after = queued + cost * P
  local allowed = after <= tolerance
  local ahead = queued
  if allowed then ahead = after end
  local whole, remainder = divmod(ahead, L)
  local remaining = 0
  if tolerance > ahead then remaining = divmod(tolerance - ahead, P) end
  local retry = -1
  if not allowed then retry = div_ceil(after - tolerance, L) end
  local delay = 0
  if p.queue and allowed then delay = div_ceil(queued, L) end
  local kept = false
  if ahead > 0 then
    kept = int(now + whole)
    if remainder > 0 then kept = kept .. ':' .. int(remainder) end
  end
  return decision(allowed, remaining, div_ceil(ahead, L), retry, delay, kept)
end

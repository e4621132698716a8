-- gcra and leaky_bucket: the theoretical arrival time, in microseconds plus a
-- remainder in ticks of 1/L microsecond (L = limit / gcd(limit, period)); one unit of
-- cost is P ticks (P = period / gcd). State "tat" or "tat:remainder", so a policy whose
-- period divides evenly keeps a single integer. Mirrors weir-core's gcra.rs.

-- The theoretical arrival time and its remainder, or nil. A state of another algorithm
-- is tagged with a letter: none of GCRA's. Most states are one integer;
-- "tat:remainder" is parsed apart; anything else (another algorithm's state) reads as
-- none.
local function gcra_tat(state)
  local tat, remainder = state and tonumber(state), 0
  if state and not tat then
    local colon = string.find(state, ':', 1, true)
    if colon and colon > 1 then
      tat = tonumber(string.sub(state, 1, colon - 1))
      remainder = tonumber(string.sub(state, colon + 1)) or 0
    end
  end
  return tat, remainder
end

local function gcra(state, now, cost, _, capacity, _, L, P, queue)
  local tolerance = capacity * P
  local queued = 0
  local tat, remainder = gcra_tat(state)
  if tat then
    if tat >= now then
      -- A clock so far behind the state that the ticks would leave the exact range of
      -- doubles (2^53) is denied anyway; keep it within range.
      if tat - now > 4503599627370496 / L then
        queued = 4503599627370496
      else
        queued = (tat - now) * L + remainder
      end
    end
  end
  local after = queued + cost * P
  -- A peek is allowed even past the tolerance (a debt, see gcra_charge).
  local allowed = cost == 0 or after <= tolerance
  local ahead = queued
  if allowed then ahead = after end
  local whole, remainder = divmod(ahead, L)
  local remaining = 0
  if tolerance > ahead then remaining = divmod(tolerance - ahead, P) end
  local retry = -1
  if not allowed then retry = div_ceil(after - tolerance, L) end
  local delay = 0
  if queue and allowed then delay = div_ceil(queued, L) end
  local kept = false
  if ahead > 0 then
    kept = int(now + whole)
    if remainder > 0 then kept = kept .. ':' .. int(remainder) end
  end
  return allowed, remaining, div_ceil(ahead, L), retry, delay, kept
end

-- Moves the theoretical arrival time back by `cost` units (cost * P ticks), never
-- before now. Computed on the time itself, not on ticks from now, so that a clock far
-- behind the state cannot leave the exact range of doubles.
local function gcra_refund(state, now, cost, _, _, _, L, P)
  local tat, remainder = gcra_tat(state)
  if not tat then return false, 0 end
  local whole, part = divmod(cost * P, L)
  tat, remainder = tat - whole, remainder - part
  if remainder < 0 then tat, remainder = tat - 1, remainder + L end
  if tat < now or (tat == now and remainder == 0) then return false, 0 end
  local kept, reset = int(tat), tat - now
  if remainder > 0 then kept, reset = kept .. ':' .. int(remainder), reset + 1 end
  return kept, reset
end

-- Moves the theoretical arrival time ahead by `cost` units (cost * P ticks) from
-- max(tat, now), however far past the tolerance: a debt that later checks wait out.
-- Returns the state to keep and its reset, as a refund does. Mirrors Gcra::charge.
local function gcra_charge(state, now, cost, limit, capacity, period, L, P, queue)
  local tat, remainder = gcra_tat(state)
  if not tat or tat < now then tat, remainder = now, 0 end
  local whole, part = divmod(cost * P, L)
  tat, remainder = tat + whole, remainder + part
  if remainder >= L then tat, remainder = tat + 1, remainder - L end
  local kept = int(tat)
  if remainder > 0 then kept = kept .. ':' .. int(remainder) end
  return settled(gcra, kept, now, limit, capacity, period, L, P, queue)
end

-- The arrival time with `held` units out in leases (lease.lua): never before now +
-- held * P ticks, the clamp of a full bucket raised by what the leases hold. The state
-- unchanged when nothing is held. Mirrors Gcra::capped.
local function gcra_cap(state, now, _, L, P, held)
  if held == 0 then return state end
  local tat, remainder = gcra_tat(state)
  local whole, part = divmod(held * P, L)
  if not tat or now + whole > tat or (now + whole == tat and part > remainder) then
    tat, remainder = now + whole, part
  end
  if remainder > 0 then return int(tat) .. ':' .. int(remainder) end
  return int(tat)
end

-- token_bucket: tokens in units of 1/P of a token (P = period / gcd(limit, period) in
-- microseconds), refilled by L = limit / gcd units per microsecond, exactly.
-- State "t:tokens:last". Mirrors weir-core's token_bucket.rs.
local function token_bucket(state, now, cost, _, capacity, _, L, P)
  state = tagged(state, 't')
  capacity = capacity * P
  local tokens, last = capacity, now
  if state then
    local s = numbers(state)
    tokens, last = s[1], s[2]
  end
  -- Before `last`, the clock went backwards: no refill, and waits count from now
  -- plus what the state is ahead.
  local at = now
  if last > at then at = last end
  local skew = at - now
  local missing = capacity - tokens
  -- Compared, not added: a long idle time times the rate may exceed 2^53, but then
  -- the bucket is full anyway.
  if (at - last) * L >= missing then
    tokens = capacity
  else
    tokens = tokens + (at - last) * L
  end
  local needed = cost * P
  local allowed = tokens >= needed
  if allowed then tokens = tokens - needed end
  local retry = -1
  if not allowed then retry = skew + div_ceil(needed - tokens, L) end
  local reset, kept = 0, false
  if tokens < capacity then
    reset = skew + div_ceil(capacity - tokens, L)
    kept = 't:' .. int(tokens) .. ':' .. int(at)
  end
  return allowed, divmod(tokens, P), reset, retry, 0, kept
end

-- Puts `cost` tokens back as of `last`, up to the capacity; the refill from `last` on
-- comes after, which gives what refilling first would (both stop at the capacity). A
-- `last` ahead of now (a debt, or a clock gone back) is first brought back, at most to
-- now, so a debt is paid before a refund is spent. Mirrors TokenBucket::refund.
local function token_bucket_refund(state, now, cost, limit, capacity, period, L, P)
  local s = tagged(state, 't')
  if s then
    s = numbers(s)
    local added, last = cost * P, s[2]
    if last > now then
      -- Whole microseconds of refill, compared with the debt's: (last - now) * L may
      -- pass 2^53.
      local back = divmod(added, L)
      if back > last - now then back = last - now end
      last = last - back
      added = added - back * L
    end
    local tokens = math.min(s[1] + added, capacity * P)
    state = 't:' .. int(tokens) .. ':' .. int(last)
  end
  return settled(token_bucket, state, now, limit, capacity, period, L, P)
end

-- Takes `cost` tokens from the bucket refilled to max(now, last), even when fewer are
-- there: what is missing (the debt) moves `last` ahead by the time it takes to refill,
-- and the fraction of a microsecond's refill over is kept as tokens. Checks before then
-- see a clock behind the state: no refill, waits counted from the debt's end. Returns
-- the state to keep and its reset, as a refund does. Mirrors TokenBucket::charge.
local function token_bucket_charge(state, now, cost, limit, capacity, period, L, P)
  local cap = capacity * P
  local tokens, at = cap, now
  local s = tagged(state, 't')
  if s then
    s = numbers(s)
    if s[2] > at then at = s[2] end
    -- Compared, not added, as in token_bucket.
    if (at - s[2]) * L < cap - s[1] then tokens = s[1] + (at - s[2]) * L end
  end
  local needed = cost * P
  if tokens >= needed then
    tokens = tokens - needed
  else
    local wait = div_ceil(needed - tokens, L)
    tokens, at = wait * L - (needed - tokens), at + wait
  end
  local kept = 't:' .. int(tokens) .. ':' .. int(at)
  return settled(token_bucket, kept, now, limit, capacity, period, L, P)
end

-- The bucket refilled to `now` but never beyond capacity - held tokens: what a check
-- reads with `held` units out in leases (lease.lua). The state unchanged when nothing
-- is held. Mirrors TokenBucket::capped.
local function token_bucket_cap(state, now, capacity, L, P, held)
  if held == 0 then return state end
  local cap = math.max(capacity - held, 0) * P
  local tokens, at = cap, now
  local s = tagged(state, 't')
  if s then
    s = numbers(s)
    if s[2] > at then at = s[2] end
    local missing = cap - s[1]
    -- Compared, not added, as in token_bucket.
    if missing > 0 and (at - s[2]) * L < missing then tokens = s[1] + (at - s[2]) * L end
  end
  return 't:' .. int(tokens) .. ':' .. int(at)
end

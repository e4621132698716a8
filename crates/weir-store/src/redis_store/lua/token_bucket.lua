-- token_bucket: tokens in units of 1/P of a token (P = period / gcd(limit, period) in
-- microseconds), refilled by L = limit / gcd units per microsecond, exactly.
-- State "tokens:last". Mirrors weir-core's token_bucket.rs.
local function token_bucket(state, now, cost, p)
  local capacity = p.capacity * p.P
  local tokens, last = capacity, now
  if state then
    local s = numbers(state)
    tokens, last = s[1], s[2]
  end
  if now < last then now = last end
  local missing = capacity - tokens
  -- Compared, not added: a long idle time times the rate may exceed 2^53, but then
  -- the bucket is full anyway.
  if (now - last) * p.L >= missing then
    tokens = capacity
  else
    tokens = tokens + (now - last) * p.L
  end
  local needed = cost * p.P
  local allowed = tokens >= needed
  if allowed then tokens = tokens - needed end
  local retry = -1
  if not allowed then retry = div_ceil(needed - tokens, p.L) end
  local kept = false
  if tokens < capacity then kept = int(tokens) .. ':' .. int(now) end
  return decision(allowed, divmod(tokens, p.P), div_ceil(capacity - tokens, p.L), retry, 0, kept)
end

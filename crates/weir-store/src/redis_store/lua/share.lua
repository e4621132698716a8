-- Regional shares of a global limit. Mirrors weir-core's share module: the same steps
-- on the same numbers, in microseconds, tokens in units of 1/period (us) of a token
-- (so that a change of rate keeps the level's meaning).
--
-- A region's record of a key, under the key's state name:
-- "r:tokens:last:share:deadline:offered:since:open:keep:demand". Decided as the algorithm
-- `regional` of the driver, whose policy arguments are: limit (the global limit L),
-- capacity (the burst C), period (us), and the region's floor in the L slot.
--
-- report (mode "6"): argv[3..] = L, C, period, floor, offered, round (us), force (0/1),
-- hold (us).
-- Returns { 1, seq, demand, enforcing } for a claim, { 0 } for none.
-- apply (mode "7"): argv[3..] = L, C, period, floor, seq, grant, hold (us). Returns { 1 }
-- if the grant is in force, else { 0 }.
-- renew (mode "8"), at the key's home, keys[1] = "<state key>:home" holding
-- "h:" then six numbers per region (share, expires, held, held expires, demand, seq):
-- argv[3..] = L, floor, region (from 0), regions, demand, enforcing, seq, hold (us).
-- Returns { 1, granted } or { 0 } for a stale claim.

-- 2^53: doubles are exact below it (share/mod.rs).
local EXACT = 9007199254740992

-- The bucket of `limit` units per period of the global L, C: its capacity, scaled and
-- rounded up (Policy::scaled_bucket).
local function share_capacity(limit, C, L)
  return div_ceil(C * limit, L)
end

local regional_idle

local function regional_read(state, now, floor, C, L, period)
  local s = tagged(state, 'r')
  if not s then
    return { tokens = share_capacity(floor, C, L) * period, last = now, share = 0,
      deadline = 0, offered = 0, since = 0, open = 0, keep = 0, demand = 0 }
  end
  local n = numbers(s)
  local r = { tokens = n[1], last = n[2], share = n[3], deadline = n[4], offered = n[5],
    since = n[6], open = n[7], keep = n[8], demand = n[9] }
  if regional_idle(r, now, floor, C, L, period) then
    return regional_read(false, now, floor, C, L, period)
  end
  return r
end

local function regional_text(r)
  return 'r:' .. int(r.tokens) .. ':' .. int(r.last) .. ':' .. int(r.share) .. ':' ..
    int(r.deadline) .. ':' .. int(r.offered) .. ':' .. int(r.since) .. ':' .. int(r.open) ..
    ':' .. int(r.keep) .. ':' .. int(r.demand)
end

-- Units per period in force at `at`: the floor, and the share before its deadline.
local function regional_rate(r, at, floor)
  if at < r.deadline then return floor + r.share end
  return floor
end

-- The bucket refilled to `at` (not before `last`) at `rate`, and never above its
-- capacity (TokenBucket::capped).
local function regional_refill(r, at, rate, C, L, period)
  local cap = share_capacity(rate, C, L) * period
  if at > r.last then
    local missing = cap - r.tokens
    -- Compared, not added, as in token_bucket.
    if missing <= 0 or (at - r.last) * rate >= missing then
      r.tokens = cap
    else
      r.tokens = r.tokens + (at - r.last) * rate
    end
    r.last = at
  elseif r.tokens > cap then
    r.tokens = cap
  end
end

-- The bucket brought to the deadline at the share's rate, if it passed since.
local function regional_advance(r, now, floor, C, L, period)
  if r.share > 0 and r.last < r.deadline and r.deadline <= now then
    regional_refill(r, r.deadline, floor + r.share, C, L, period)
  end
end

-- Whether nothing in the record matters at `now` (Regional::idle): its bucket full,
-- no share in force, its claims' time over. Read as none then.
regional_idle = function(r, now, floor, C, L, period)
  if r.deadline > now or r.keep > now then return false end
  local copy = { tokens = r.tokens, last = r.last, share = r.share, deadline = r.deadline }
  regional_advance(copy, now, floor, C, L, period)
  local rate = regional_rate(copy, now, floor)
  regional_refill(copy, math.max(now, copy.last), rate, C, L, period)
  return copy.tokens >= share_capacity(rate, C, L) * period
end

-- The record as the state to keep, or false once nothing in it matters.
local function regional_keep(r, now, floor, C, L, period)
  if regional_idle(r, now, floor, C, L, period) then return false end
  return regional_text(r)
end

-- The algorithm `regional`: (state, now, cost, L, C, period, floor).
local function regional(state, now, cost, L, C, period, floor)
  local r = regional_read(state, now, floor, C, L, period)
  regional_advance(r, now, floor, C, L, period)
  local rate = regional_rate(r, now, floor)
  local capacity = share_capacity(rate, C, L)
  -- Before `last`, the clock went backwards: no refill, waits count from now.
  local at = math.max(now, r.last)
  local skew = at - now
  regional_refill(r, at, rate, C, L, period)
  local cap = capacity * period
  if r.tokens > cap then r.tokens = cap end
  local fits = cost <= capacity
  local needed = cost * period
  local allowed = fits and r.tokens >= needed
  if allowed then r.tokens = r.tokens - needed end
  local retry = -1
  if fits and not allowed then retry = skew + div_ceil(needed - r.tokens, rate) end
  local reset = 0
  if r.tokens < cap then reset = skew + div_ceil(cap - r.tokens, rate) end
  -- Full again at the share's rate, unless the share ends first: then at its deadline
  -- the capacity drops to the floor's, and the floor's rate goes on (regional.rs).
  if r.share > 0 and now < r.deadline and reset > r.deadline - now then
    local tokens = math.min(r.tokens + math.max(0, r.deadline - at) * rate, cap)
    local floor_cap = share_capacity(floor, C, L) * period
    tokens = math.min(tokens, floor_cap)
    reset = r.deadline - now
    if tokens < floor_cap then reset = reset + div_ceil(floor_cap - tokens, floor) end
  end
  -- A peek leaves the record as it is (see share/mod.rs).
  local kept = state
  if cost > 0 then kept = regional_keep(r, now, floor, C, L, period) end
  return allowed, math.floor(r.tokens / period), reset, retry, 0, kept
end

-- Puts `cost` back into the bucket at the rate in force, up to its capacity.
local function regional_refund(state, now, cost, L, C, period, floor)
  local r = regional_read(state, now, floor, C, L, period)
  regional_advance(r, now, floor, C, L, period)
  local rate = regional_rate(r, now, floor)
  regional_refill(r, math.max(now, r.last), rate, C, L, period)
  local cap = share_capacity(rate, C, L)
  if cost <= cap then r.tokens = math.min(r.tokens + cost * period, cap * period) end
  local kept = regional_keep(r, now, floor, C, L, period)
  local _, _, reset = regional(kept, now, 0, L, C, period, floor)
  return kept, reset
end

-- How long (ms) a record must live: its deadline and its claim's keep, as well as its
-- bucket's reset (`px`).
local function regional_px(kept, px, now)
  local s = tagged(kept, 'r')
  if not s then return px end
  local n = numbers(s)
  local until_us = math.max(n[4], n[8]) - now
  if until_us > 0 then px = math.max(px, div_ceil(until_us, 1000) + 1000) end
  return px
end

local function regional_write(key, r, now, floor, C, L, period)
  local kept = regional_keep(r, now, floor, C, L, period)
  if not kept then
    redis.call('DEL', key)
    return
  end
  local _, _, reset = regional(kept, now, 0, L, C, period, floor)
  redis.call('SET', key, kept, 'PX', regional_px(kept, math.max(1, div_ceil(reset, 1000)) + 1000, now))
end

local function share_report(keys, argv, now)
  local L, C, period, floor = tonumber(argv[3]), tonumber(argv[4]), tonumber(argv[5]),
    tonumber(argv[6])
  local offered, round, force = tonumber(argv[7]), tonumber(argv[8]), argv[9] == '1'
  local hold = tonumber(argv[10])
  local r = regional_read(redis.call('GET', keys[1]), now, floor, C, L, period)
  regional_advance(r, now, floor, C, L, period)
  -- Bounded so that the products below stay exact (regional.rs).
  r.offered = math.min(r.offered + offered, math.floor(EXACT / 2 / period))
  round = math.max(round, 1)
  r.keep = math.max(r.keep, now + 2 * round)
  local open = r.open == 1 and now < r.since + round
  local due = r.since == 0 or force or now >= r.since + math.floor(round / 2)
  local reply = { 0 }
  if not open and due then
    local enforcing = 0
    if now < r.deadline then enforcing = r.share end
    local elapsed = now - r.since
    if r.since == 0 or elapsed <= 0 then elapsed = round end
    -- Averaged over the claims, with a time constant of a round (see regional.rs).
    local demand = math.floor(r.offered * period / elapsed)
    if r.since ~= 0 then
      demand = math.floor((r.demand * round + demand * elapsed) / (round + elapsed))
    end
    demand = math.min(demand, math.floor(EXACT / 2 / round))
    r.demand = demand
    r.offered = 0
    r.since = math.max(now, r.since + 1)
    r.open = 0
    if demand > 0 or enforcing > 0 or force then
      -- The share in force ends by this claim's deadline under the hold used now.
      r.deadline = math.min(r.deadline, r.since + math.floor(hold / 4) * 3)
      r.open = 1
      reply = { 1, r.since, demand, enforcing }
    end
  end
  regional_write(keys[1], r, now, floor, C, L, period)
  return reply
end

local function share_apply(keys, argv, now)
  local L, C, period, floor = tonumber(argv[3]), tonumber(argv[4]), tonumber(argv[5]),
    tonumber(argv[6])
  local seq, grant, hold = tonumber(argv[7]), tonumber(argv[8]), tonumber(argv[9])
  local state = redis.call('GET', keys[1])
  local r = regional_read(state, now, floor, C, L, period)
  if r.open ~= 1 or r.since ~= seq then return { 0 } end
  r.open = 0
  local deadline = seq + math.floor(hold / 4) * 3
  local applied = 0
  if now < deadline then
    regional_advance(r, now, floor, C, L, period)
    regional_refill(r, math.max(now, r.last), regional_rate(r, now, floor), C, L, period)
    r.share = math.min(grant, L - floor)
    r.deadline = deadline
    applied = 1
  end
  regional_write(keys[1], r, now, floor, C, L, period)
  return { applied }
end

local function share_renew(keys, argv, now)
  local L, floor = tonumber(argv[3]), tonumber(argv[4])
  local me, regions = tonumber(argv[5]) + 1, tonumber(argv[6])
  local demand, enforcing = tonumber(argv[7]), tonumber(argv[8])
  local seq, hold = tonumber(argv[9]), tonumber(argv[10])
  local grantable = math.max(0, L - floor * regions)
  local records = {}
  local s = tagged(redis.call('GET', keys[1]), 'h')
  local n = s and numbers(s) or {}
  -- Every lease expired: read as none (Home::take_from), however long Redis keeps it.
  local live = 0
  for i = 1, #n - 5, 6 do live = math.max(live, n[i + 1], n[i + 3]) end
  if live <= now then n = {} end
  if #n > 0 and #n ~= 6 * regions then
    -- Live records for another number of regions: the regions are being
    -- reconfigured; nothing is granted, or recorded, until they expire.
    if seq <= 0 then return { 0 } end
    return { 1, 0 }
  end
  for i = 1, regions do
    local b = (i - 1) * 6
    records[i] = { share = n[b + 1] or 0, expires = n[b + 2] or 0, held = n[b + 3] or 0,
      held_expires = n[b + 4] or 0, demand = n[b + 5] or 0, seq = n[b + 6] or 0 }
  end
  if seq <= records[me].seq then return { 0 } end
  local reserved, wanted = 0, 0
  for i = 1, regions do
    if i ~= me then
      local r = records[i]
      local share, held = 0, 0
      if now < r.expires then
        share = r.share
        wanted = wanted + r.demand
      end
      if now < r.held_expires then held = r.held end
      reserved = reserved + math.max(share, held)
    end
  end
  -- The demand-weighted part, the demands halved until the product is exact
  -- (home.rs's target).
  local target = 0
  if demand > 0 then
    local d, w = demand, wanted
    while grantable * (d + w) >= EXACT do
      d = math.floor(d / 2)
      w = math.floor(w / 2)
    end
    d = math.max(d, 1)
    target = math.floor(grantable * d / (d + w))
  end
  local granted = math.min(target, math.max(0, grantable - reserved))
  -- A home whose Redis started less than a hold ago may have lost records of shares
  -- still in force (a restart without persistence): it grants nothing until they have
  -- all passed their deadlines (the regions keep their floors meanwhile).
  local uptime = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)'))
  if uptime and uptime * 1000000 < hold then granted = 0 end
  -- What the region says it enforces stays reserved, never more than its record
  -- reserved until now (a delayed renewal must not take back units granted since).
  local mine, previous = records[me], 0
  if now < mine.expires then previous = mine.share end
  if now < mine.held_expires then previous = math.max(previous, mine.held) end
  records[me] = { share = granted, expires = now + hold, held = math.min(enforcing, previous),
    held_expires = now + hold, demand = demand, seq = seq }
  local parts, last = {}, 0
  for i = 1, regions do
    local r = records[i]
    parts[#parts + 1] = int(r.share) .. ':' .. int(r.expires) .. ':' .. int(r.held) .. ':' ..
      int(r.held_expires) .. ':' .. int(r.demand) .. ':' .. int(r.seq)
    last = math.max(last, r.expires, r.held_expires)
  end
  redis.call('SET', keys[1], 'h:' .. table.concat(parts, ':'), 'PX',
    div_ceil(last - now, 1000) + 1000)
  return { 1, granted }
end

-- Token leases: take units of a token_bucket or gcra key before spending them, give
-- back the rest. Mirrors weir-core's lease module: the same steps on the same numbers,
-- in microseconds and in the algorithms' units (see token_bucket.lua, gcra.lua).
--
-- keys[1]: the key's state, as every check keeps it. keys[2]: its lease records, a
-- hash in the same slot ("<state key>:leases"): "n" the last lease id given, "s" the
-- time (us) the state was last brought forward under the records, and per lease
-- "<id>" = "units:expires" (us, exclusive), and "w", "a", "b": a second (whole
-- seconds of the store's time), the units leased in it, and those leased in the second
-- before (the key's take rate: Leases::taken_rate). Units held by unexpired records
-- count against the capacity: the bucket never refills beyond capacity - outstanding.
--
-- take (mode "4"): argv[3..] = algorithm, capacity, L, P, min, max, hold (us), the id
-- of a lease to give back first ("" for none) and its unspent units. Returns allowed
-- (0/1), remaining, reset (us), retry (us, -1 for none), delay (us), units granted,
-- lease id (0 for none), 1 if the lease given back was found, and the key's take rate
-- (units leased by every instance in the busier of this second and the one before).
-- give_back (mode "5"): argv[3..] = algorithm, capacity, L, P, lease id, unspent.
-- Returns { 1 } if the lease was found (and given back), else { 0 }, changing nothing.

-- A key's records above this many: a take grants `min`, spent at once (MAX_LEASES).
local MAX_LEASES = 64

-- The policy of argv: its algorithm's check, refund and cap, and numbers.
local function leased(argv)
  local name = argv[3]
  local p = { capacity = tonumber(argv[4]), L = tonumber(argv[5]), P = tonumber(argv[6]) }
  if name == 'token_bucket' then
    p.check, p.refund, p.cap = token_bucket, token_bucket_refund, token_bucket_cap
  elseif name == 'gcra' then
    p.check, p.refund, p.cap = gcra, gcra_refund, gcra_cap
  else
    error('weir: leases are for token_bucket and gcra, not ' .. name)
  end
  return p
end

-- A check of `cost` on `state` under p: the algorithm's values (decide in driver.lua).
local function lease_decide(p, state, now, cost)
  return decide(p.check, state, now, cost, nil, p.capacity, nil, p.L, p.P, false)
end

-- The records: { records = { {id, units, expires}... }, last, since, gone = ids to
-- delete, added = records to write }.
local function lease_read(key)
  local flat = redis.call('HGETALL', key)
  local l = { records = {}, last = 0, since = 0, gone = {}, added = {},
    second = 0, this = 0, before = 0, turn = 0 }
  for i = 1, #flat, 2 do
    local field, value = flat[i], flat[i + 1]
    if field == 'n' then
      l.last = tonumber(value)
    elseif field == 's' then
      l.since = tonumber(value)
    elseif field == 'w' then
      l.second = tonumber(value)
    elseif field == 'a' then
      l.this = tonumber(value)
    elseif field == 'b' then
      l.before = tonumber(value)
    elseif field == 't' then
      l.turn = tonumber(value)
    else
      local colon = string.find(value, ':', 1, true)
      l.records[#l.records + 1] = { id = tonumber(field),
        units = tonumber(string.sub(value, 1, colon - 1)),
        expires = tonumber(string.sub(value, colon + 1)) }
    end
  end
  return l
end

-- The take counts moved on to the second of `now` (the one before kept only if it is
-- the one just past; a clock stepped back counts in the second last seen).
local function taken_at(l, now)
  local second = math.floor(now / 1000000)
  if second > l.second then
    if second == l.second + 1 then l.before = l.this else l.before = 0 end
    l.second, l.this = second, 0
  end
end

-- The time a leasing take denied at `now` is told to come back (Leases::next_turn):
-- `at`, or while takes denied before are still to come back, `span` after the last
-- turn, but no later than `latest` unless `at` is.
local function next_turn(l, now, at, span, latest)
  local turn = at
  if l.turn > now then turn = math.max(at, math.min(l.turn + span, latest)) end
  l.turn = turn
  return turn
end

-- The key's take rate at `now` (Leases::taken_rate).
local function taken_rate(l, now)
  taken_at(l, now)
  return math.max(l.this, l.before)
end

-- Units held by records unexpired at `at`.
local function outstanding(l, at)
  local held = 0
  for _, r in ipairs(l.records) do
    if r.expires > at then held = held + r.units end
  end
  return held
end

-- Brings the state forward to `now` under the cap as it was at each instant: up to
-- each expiry since `since`, the records expiring then or later held their units. Then
-- drops the expired records (their units count as spent).
local function lease_advance(p, state, l, now)
  local ends = {}
  for _, r in ipairs(l.records) do
    if r.expires > l.since and r.expires <= now then ends[#ends + 1] = r.expires end
  end
  table.sort(ends)
  local previous
  for _, e in ipairs(ends) do
    if e ~= previous then
      state = p.cap(state, e, p.capacity, p.L, p.P, outstanding(l, e - 1))
      previous = e
    end
  end
  state = p.cap(state, now, p.capacity, p.L, p.P, outstanding(l, now))
  -- Even back in time (see Leases::forward_to).
  l.since = now
  local kept = {}
  for _, r in ipairs(l.records) do
    if r.expires > now then kept[#kept + 1] = r else l.gone[#l.gone + 1] = r.id end
  end
  l.records = kept
  return state
end

-- Removes lease `id` and refunds `unspent` of its units under the cap of the others;
-- the state, and whether the lease was found.
local function lease_close(p, state, l, now, id, unspent)
  for i, r in ipairs(l.records) do
    if r.id == id then
      table.remove(l.records, i)
      l.gone[#l.gone + 1] = id
      local u = math.min(unspent, r.units)
      if state and u > 0 and u <= p.capacity then
        state = p.refund(state, now, u, nil, p.capacity, nil, p.L, p.P)
      end
      return p.cap(state, now, p.capacity, p.L, p.P, outstanding(l, now)), true
    end
  end
  return state, false
end

-- When a take of `min` (at most the capacity) denied now would be granted if no lease
-- is given back early: once enough leases expire for the cap to allow it, as soon as
-- the refill reaches it.
local function lease_retry(p, state, l, now, min)
  local held, room, at = outstanding(l, now), p.capacity - min, now
  if held > room then
    local ends = {}
    for _, r in ipairs(l.records) do ends[#ends + 1] = { r.expires, r.units } end
    table.sort(ends, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
    for _, e in ipairs(ends) do
      if held <= room then break end
      held, at = held - e[2], e[1]
    end
  end
  local copy = { records = l.records, since = l.since, gone = {} }
  local allowed, _, _, retry = lease_decide(p, lease_advance(p, state, copy, at), at, min)
  if allowed then retry = 0 end
  return at - now + retry
end

-- Writes what changed: the state (its expiry no earlier than the bucket can be full
-- after the last lease ends) and the records with the time the state is brought
-- forward to (their expiry a minute past the last record and the last id, so that a
-- late give-back never meets a reused id).
local function lease_write(keys, p, stored, state, l, now, given)
  local last_end = now
  for _, r in ipairs(l.records) do
    if r.expires > last_end then last_end = r.expires end
  end
  if state ~= stored then
    if state then
      local _, _, reset = lease_decide(p, state, now, 0)
      if last_end > now then
        reset = math.max(reset, last_end - now + div_ceil(p.capacity * p.P, p.L))
      end
      redis.call('SET', keys[1], state, 'PX', expiry_ms(reset, given))
    else
      redis.call('DEL', keys[1])
    end
  end
  -- With no record before or after, the hash has nothing to keep (a take with no hold
  -- on a key no one leases writes only the state, as a check does).
  if #l.gone == 0 and #l.added == 0 and (#l.records == 0 or state == stored) then return end
  if #l.gone > 0 then
    for i = 1, #l.gone do l.gone[i] = int(l.gone[i]) end
    redis.call('HDEL', keys[2], unpack(l.gone))
  end
  local fields = { 'n', int(l.last), 's', int(l.since),
    'w', int(l.second), 'a', int(l.this), 'b', int(l.before), 't', int(l.turn) }
  for _, r in ipairs(l.added) do
    fields[#fields + 1] = int(r.id)
    fields[#fields + 1] = int(r.units) .. ':' .. int(r.expires)
  end
  redis.call('HSET', keys[2], unpack(fields))
  redis.call('PEXPIRE', keys[2],
    expiry_ms(math.max(last_end, l.last + 1, l.turn) - now, given) + 60000)
end

function lease_take(keys, argv, now)
  local p = leased(argv)
  local min, max, hold = tonumber(argv[7]), tonumber(argv[8]), tonumber(argv[9])
  local stored = redis.call('GET', keys[1])
  local state = stored
  local l = lease_read(keys[2])
  -- A state found full is none, as a check finds it (with no record, the peek below
  -- finds it so).
  if #l.records > 0 then
    if not select(6, lease_decide(p, state, now, 0)) then state = false end
    state = lease_advance(p, state, l, now)
  else
    l.since = now
  end
  local closed = false
  if argv[10] ~= '' then
    state, closed = lease_close(p, state, l, now, tonumber(argv[10]), tonumber(argv[11]))
  end
  local _, available, _, _, _, peeked = lease_decide(p, state, now, 0)
  if not peeked then state = false end
  if min > available or min > p.capacity then
    local _, remaining, reset, retry, delay = lease_decide(p, state, now, min)
    local turned = false
    if min <= p.capacity then
      retry = lease_retry(p, state, l, now, min)
      if hold > 0 then
        -- A leasing take waits its turn behind the others denied before it.
        local span = div_ceil(math.min(math.max(max, min), p.capacity) * p.P, p.L)
        local latest = now + math.min(div_ceil(p.capacity * p.P, p.L), math.floor(hold / 4))
        retry = next_turn(l, now, now + retry, span, latest) - now
        turned = true
      end
    end
    if closed then
      lease_write(keys, p, stored, state, l, now, argv[1])
    elseif turned then
      redis.call('HSET', keys[2], 't', int(l.turn))
      local keep = expiry_ms(l.turn - now, argv[1]) + 60000
      if redis.call('PTTL', keys[2]) < keep then redis.call('PEXPIRE', keys[2], keep) end
    end
    return { 0, remaining, reset, retry, delay, 0, 0, closed and 1 or 0, taken_rate(l, now) }
  end
  -- With no room for a record (MAX_LEASES out), only `min` is granted, spent at once:
  -- units granted beyond it with no record could not be held, and would be lost.
  if hold > 0 and #l.records >= MAX_LEASES then max = min end
  local units = math.min(math.max(max, min), available)
  local allowed, remaining, reset, retry, delay, kept = lease_decide(p, state, now, units)
  local id = 0
  if units > 0 then
    state = kept
    if hold > 0 and #l.records < MAX_LEASES then
      id = math.max(l.last + 1, now)
      l.last = id
      local record = { id = id, units = units, expires = now + hold }
      l.records[#l.records + 1] = record
      l.added[1] = record
      taken_at(l, now)
      l.this = l.this + units
    end
  end
  if units > 0 or closed then lease_write(keys, p, stored, state, l, now, argv[1]) end
  return { allowed and 1 or 0, remaining, reset, retry, delay, units, id, closed and 1 or 0,
    taken_rate(l, now) }
end

function lease_give_back(keys, argv, now)
  local p = leased(argv)
  local id, unspent = tonumber(argv[7]), tonumber(argv[8])
  local l = lease_read(keys[2])
  local held = false
  for _, r in ipairs(l.records) do
    if r.id == id and r.expires > now then held = true end
  end
  if not held then return { 0 } end
  local stored = redis.call('GET', keys[1])
  local state = lease_close(p, lease_advance(p, stored, l, now), l, now, id, unspent)
  lease_write(keys, p, stored, state, l, now, argv[1])
  return { 1 }
end

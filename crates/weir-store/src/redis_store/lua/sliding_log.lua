-- sliding_log: every admitted instant as a record (time, cumulative cost), oldest
-- first, in a ring kept in one string, read and written a record at a time
-- (GETRANGE / SETRANGE): a check costs Redis a few calls whatever the log's length,
-- where decoding the whole log made a check at limit 10,000 take milliseconds, during
-- which Redis runs nothing else. Mirrors weir-core's sliding_log.rs entry for entry:
-- the ring holds exactly its entries (a request counts until time + period; instants
-- merge; expired entries are dropped when a cost is admitted).
--
-- The string: "L:", then six doubles (little-endian, exact integers below 2^53): the
-- ring's capacity in records, the sequence numbers of the oldest entry and of the one
-- after the newest, the cumulative cost before the oldest, and the newest entry's
-- time and cumulative cost; then the records, 16 bytes each (time, cumulative cost),
-- entry n in slot n mod capacity. An entry's cost is its cumulative cost less the one
-- before it, so the live total and the entry where a wait ends are found by binary
-- search. The log holds at most `limit` entries (each costs at least 1, and a cost is
-- admitted only within the limit), so a ring of `limit` records never overflows; a
-- limit raised past it lays the log out again once, in a larger ring.
--
-- In Lua the log is a view: the stored header, the records this call wrote (a suffix,
-- from `mark` on) and those it read (`seen`, shared by the views one call derives).
-- A check or refund derives a new view and never changes the one it got; `log_save`
-- writes a view's changes: its new records and header, or the whole string for a new
-- layout. The driver reads and writes through `log_open` / `log_save` (see read_state
-- / write_state). Sequence numbers and running totals only grow while a key lives:
-- at the most an accepted policy admits (10,000 a millisecond) they stay below 2^53
-- for 28 years of traffic that never lets the log empty.

local LOG_HEADER = 50
local LOG_RECORD = 16
-- Records read at once where a search usually ends in steady traffic (from the oldest
-- live entry, where expiry and waits end; from the newest, where a refund ends),
-- before a binary search takes over.
local LOG_CHUNK = 16

-- An empty log, laid out anew when saved (it reads nothing), in a ring of the
-- policy's limit from its first admission.
local function log_new()
  return { cap = 0, head = 0, tail = 0, base = 0, ntime = 0, ncum = 0,
    mark = 0, recs = {}, seen = {}, fresh = true }
end

-- A log that weir kept in its former format, "l:time:cost,time:cost..." (decoded
-- whole on every check), read once and laid out anew when saved, so an upgrade
-- forgets nothing.
local function log_former(key)
  local view, seq, cum = log_new(), 0, 0
  for at, c in string.gmatch(redis.call('GET', key), '(%d+):(%d+)') do
    cum = cum + tonumber(c)
    view.recs[seq] = { tonumber(at), cum }
    view.ntime, view.ncum, seq = tonumber(at), cum, seq + 1
  end
  view.tail, view.cap = seq, math.max(seq, 1)
  return view
end

-- The stored log of `key` as a view, or false for none (or another algorithm's state).
local function log_open(key)
  local header = redis.call('GETRANGE', key, 0, LOG_HEADER - 1)
  if string.sub(header, 1, 2) == 'l:' then return log_former(key) end
  if #header < LOG_HEADER or string.sub(header, 1, 2) ~= 'L:' then return false end
  local cap, head, tail, base, ntime, ncum = struct.unpack('<dddddd', header, 3)
  return { key = key, cap = cap, head = head, tail = tail, base = base, ntime = ntime,
    ncum = ncum, mark = tail, recs = {}, seen = {}, fresh = false }
end

-- A copy of `view` to change (its written records copied: a few at most).
local function log_derive(view)
  local out = {}
  for k, v in pairs(view) do out[k] = v end
  local recs = {}
  for seq, r in pairs(view.recs) do recs[seq] = r end
  out.recs = recs
  return out
end

-- The byte offset (0-based) of entry `seq`'s slot.
local function log_offset(view, seq)
  local _, slot = divmod(seq, view.cap)
  return LOG_HEADER + slot * LOG_RECORD
end

-- Entry `seq` (head <= seq < tail): its time and cumulative cost.
local function log_record(view, seq)
  local r = view.recs[seq] or view.seen[seq]
  if r then return r[1], r[2] end
  local offset = log_offset(view, seq)
  local t, c = struct.unpack('<dd', redis.call('GETRANGE', view.key, offset, offset + 15))
  view.seen[seq] = { t, c }
  return t, c
end

-- The first entry in [lo, hi) whose field (1: time, 2: cumulative cost) is above
-- `bound`, or hi if none (the fields grow with the sequence): the records from lo
-- this call already holds, up to LOG_CHUNK more in one read, then a binary search.
local function log_first(view, lo, hi, field, bound)
  while lo < hi do
    local r = view.recs[lo] or view.seen[lo]
    if not r then break end
    if r[field] > bound then return lo end
    lo = lo + 1
  end
  if lo >= hi then return hi end
  local n = math.min(LOG_CHUNK, hi - lo, view.mark - lo)
  if n > 1 then
    local offset = log_offset(view, lo)
    n = math.min(n, (view.cap * LOG_RECORD + LOG_HEADER - offset) / LOG_RECORD)
    local data = redis.call('GETRANGE', view.key, offset, offset + n * LOG_RECORD - 1)
    for i = 0, n - 1 do
      local t, c = struct.unpack('<dd', data, i * LOG_RECORD + 1)
      view.seen[lo + i] = { t, c }
      if (field == 1 and t or c) > bound then return lo + i end
    end
    lo = lo + n
  end
  while lo < hi do
    local mid = lo + math.floor((hi - lo) / 2)
    local t, c = log_record(view, mid)
    if (field == 1 and t or c) > bound then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- The first entry in [lo, hi) whose cumulative cost is above `bound`, found from the
-- newest: up to LOG_CHUNK records before hi in one read (where a refund ends), then a
-- binary search.
local function log_last(view, lo, hi, bound)
  local from = math.max(lo, hi - LOG_CHUNK)
  for seq = hi - 1, math.max(from, view.mark), -1 do
    if view.recs[seq][2] <= bound then return seq + 1 end
    hi = seq
  end
  local stored = math.min(hi, view.mark)
  if stored - from > 1 then
    local _, slot = divmod(stored - 1, view.cap)
    from = math.max(from, stored - 1 - slot)
    local offset = log_offset(view, from)
    local data = redis.call('GETRANGE', view.key, offset, offset + (stored - from) * LOG_RECORD - 1)
    for seq = stored - 1, from, -1 do
      local t, c = struct.unpack('<dd', data, (seq - from) * LOG_RECORD + 1)
      view.seen[seq] = { t, c }
      if c <= bound then return seq + 1 end
      hi = seq
    end
  end
  return log_first(view, lo, hi, 2, bound)
end

-- The cumulative cost before entry `seq`.
local function log_before(view, seq)
  if seq <= view.head then return view.base end
  local _, c = log_record(view, seq - 1)
  return c
end

-- Sets the newest entry (sequence tail - 1) of a derived view.
local function log_newest(view, t, c)
  local seq = view.tail - 1
  view.recs[seq] = { t, c }
  view.ntime, view.ncum = t, c
  if seq < view.mark then view.mark = seq end
end

-- Lays a stored log's derived view out anew in a ring of `cap` records (after a limit
-- was raised past its ring's size): the whole log read once.
local function log_relayout(view, cap)
  local data = redis.call('GET', view.key)
  for seq = view.head, math.min(view.mark, view.tail) - 1 do
    local t, c = struct.unpack('<dd', data, log_offset(view, seq) + 1)
    view.recs[seq] = { t, c }
  end
  view.cap, view.mark, view.fresh = cap, view.head, true
end

-- Writes `view` to `key` with an expiry of `px` milliseconds.
local function log_save(key, view, px)
  local count = view.tail - view.head
  if view.fresh then
    local parts = { 'L:' .. struct.pack('<dddddd', view.cap, 0, count, view.base, view.ntime,
      view.ncum) }
    for seq = view.head, view.tail - 1 do
      local r = view.recs[seq]
      parts[#parts + 1] = struct.pack('<dd', r[1], r[2])
    end
    redis.call('SET', key, table.concat(parts), 'PX', px)
    return
  end
  -- The written suffix, in at most two runs (the ring wraps once at most).
  local seq = math.max(view.mark, view.head)
  while seq < view.tail do
    local offset = log_offset(view, seq)
    local parts = {}
    repeat
      local r = view.recs[seq]
      parts[#parts + 1] = struct.pack('<dd', r[1], r[2])
      seq = seq + 1
    until seq >= view.tail or log_offset(view, seq) == LOG_HEADER
    redis.call('SETRANGE', key, offset, table.concat(parts))
  end
  redis.call('SETRANGE', key, 0, 'L:' .. struct.pack('<dddddd', view.cap, view.head, view.tail,
    view.base, view.ntime, view.ncum))
  redis.call('PEXPIRE', key, px)
end

local function sliding_log(view, now, cost, limit, _, period)
  local empty = not view or view.tail == view.head
  -- Before the newest entry, the clock went backwards: trim as if no time had passed
  -- (waits still count from now).
  local at = now
  if not empty and view.ntime > at then at = view.ntime end
  -- The oldest live entry, the running total before it, and the live total.
  local live, before, total = 0, 0, 0
  if not empty then
    if view.ntime <= at - period then
      -- Everything has expired (a long pause): nothing to search.
      live, before = view.tail, view.ncum
    else
      live = log_first(view, view.head, view.tail, 1, at - period)
      before = log_before(view, live)
    end
    total = view.ncum - before
  end
  local allowed = total + cost <= limit
  local kept = view
  if allowed and cost > 0 then
    if not view then view = log_new() end
    kept = log_derive(view)
    kept.head, kept.base = live, before
    -- A new layout gets a ring of the limit (which holds every entry it can admit).
    if kept.fresh then kept.cap = limit end
    if kept.tail > kept.head and kept.ntime == at then
      log_newest(kept, at, kept.ncum + cost)
    else
      if kept.tail - kept.head >= kept.cap then log_relayout(kept, limit) end
      kept.tail = kept.tail + 1
      log_newest(kept, at, kept.ncum + cost)
    end
    total = total + cost
  end
  local reset = 0
  if total > 0 then reset = kept.ntime + period - now end
  local retry = -1
  if not allowed then
    local ends = log_first(view, live, view.tail, 2, before + total + cost - limit - 1)
    retry = log_record(view, ends) + period - now
  end
  if total == 0 then kept = false end
  return allowed, limit - total, reset, retry, 0, kept
end

-- Takes `cost` units off the newest entries (see weir-core's sliding_log.rs for what
-- that means when other requests came after the reservation).
local function sliding_log_refund(view, now, cost, ...)
  if view then
    local target = view.ncum - cost
    view = log_derive(view)
    if target <= view.base then
      view.tail = view.head
    else
      -- The entry that keeps a part: the newest, unless the refund is larger than it.
      local cut = log_last(view, view.head, view.tail, target - 1)
      view.tail = cut + 1
      log_newest(view, log_record(view, cut), target)
    end
  end
  return settled(sliding_log, view, now, ...)
end

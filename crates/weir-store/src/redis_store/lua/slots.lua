-- Slots of requests in flight (`algorithm: concurrency`): a sorted set per key,
-- `<state key>:slots`, of slot ids scored by their deadline in milliseconds on Redis's
-- clock. Slots past their deadline are dropped at each take; the set expires with its
-- latest deadline: its TTL only ever grows (`outlive`), so a take or renewal with a
-- shorter lease than another instance's (a rolling change of `store.slot_lease`)
-- never expires the set under a slot still in flight (found by the model in
-- crates/weir-lease-model, src/slots).
--
-- take:  KEYS = the sets; ARGV = 'take', id, lease ms, the limit of each set.
--        Returns {allowed (1/0), free slots of each set}; all or nothing.
-- renew: KEYS = one set; ARGV = 'renew', lease ms, ids. Moves the deadline of each
--        id still held (not expired) to now + lease; returns how many were.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function outlive(key, lease)
  if redis.call('PTTL', key) < lease then
    redis.call('PEXPIRE', key, lease)
  end
end
if ARGV[1] == 'take' then
  local id = ARGV[2]
  local lease = tonumber(ARGV[3])
  local free = {}
  local allowed = 1
  for i, key in ipairs(KEYS) do
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    local left = tonumber(ARGV[3 + i]) - redis.call('ZCARD', key)
    if left < 1 then
      allowed = 0
      left = math.max(left, 0)
    end
    free[i] = left
  end
  if allowed == 1 then
    for i, key in ipairs(KEYS) do
      redis.call('ZADD', key, now + lease, id)
      outlive(key, lease)
      free[i] = free[i] - 1
    end
  end
  table.insert(free, 1, allowed)
  return free
end
local key = KEYS[1]
local lease = tonumber(ARGV[2])
local kept = 0
for i = 3, #ARGV do
  local deadline = redis.call('ZSCORE', key, ARGV[i])
  if deadline and tonumber(deadline) > now then
    redis.call('ZADD', key, 'XX', now + lease, ARGV[i])
    kept = kept + 1
  end
end
if kept > 0 then
  outlive(key, lease)
end
return kept

-- weir: helpers shared by the algorithms. Lua numbers are doubles: integers are exact
-- up to 2^53, and weir's Rust side only sends policies whose products stay below that
-- (see params.rs), so every operation here is exact integer arithmetic.

-- a // b and a % b, exact (a float division can be one off near an integer).
local function divmod(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  if r < 0 then
    q = q - 1
    r = r + b
  elseif r >= b then
    q = q + 1
    r = r - b
  end
  return q, r
end

local function div_ceil(a, b)
  local q, r = divmod(a, b)
  if r > 0 then q = q + 1 end
  return q
end

-- Integers as text, never in exponent notation (every value here is an integer below
-- 2^53, which %d prints exactly; faster than formatting a float).
local function int(x)
  return string.format('%d', x)
end

-- Splits "a:b:c" into numbers.
local function numbers(text)
  local out = {}
  for part in string.gmatch(text, '[^:]+') do
    out[#out + 1] = tonumber(part)
  end
  return out
end

-- Every algorithm but GCRA tags its state with a letter ("f:...", "w:...", "l:...",
-- "t:..."); GCRA keeps a bare integer, the most compact value Redis holds. State left
-- by another algorithm (after a configuration change) reads as none: the key is full.
local function tagged(state, tag)
  if state and string.sub(state, 1, 2) == tag .. ':' then
    return string.sub(state, 3)
  end
  return false
end

-- Every algorithm is a function (state, now, cost, ...) where ... is the policy: limit,
-- capacity, period (us), L, P, queue (see params.rs; each algorithm reads what it
-- needs). It returns, in this order: allowed, remaining, reset (us), retry (us, -1 for
-- none), delay (us), and the state to keep (false once full again). Arguments and
-- several values, not tables: no allocation per check.
--
-- Each also has a refund function (state, now, cost, ...), cost at most the capacity,
-- returning the state to keep after giving `cost` back (false once full again) and its
-- reset (us), exactly as weir-core's `refund`.

-- A refunded state and its reset, or false once a peek finds it full. The state is
-- kept as refunded, not as the peek would rewrite it (rolled, refilled, trimmed), as
-- weir-core keeps it: a clock that later goes backwards sees the same state in both.
local function settled(algorithm, state, now, ...)
  local _, _, reset, _, _, kept = algorithm(state, now, 0, ...)
  if kept then return state, reset end
  return false, 0
end

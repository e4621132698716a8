-- wrk script: POST /v1/check for 10,000 distinct keys in turn; with WRK_DELAY_MS set,
-- each connection waits that many milliseconds between requests (a paced load).
-- Used by bench/decision_api.sh and bench/ab.sh.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, "/v1/check", nil, string.format('{"rule":"api","key":"user-%d"}', n % 10000))
end
local wait = tonumber(os.getenv("WRK_DELAY_MS") or "")
if wait then
  function delay()
    return wait
  end
end

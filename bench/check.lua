-- wrk script: POST /v1/check for 10,000 distinct keys in turn.
-- Used by bench/decision_api.sh.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, "/v1/check", nil, string.format('{"rule":"api","key":"user-%d"}', n % 10000))
end

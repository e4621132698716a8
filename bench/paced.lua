-- wrk script: each connection waits WRK_DELAY_MS milliseconds between requests, so
-- the load is paced rather than flat out. Used by bench/gateway.sh.
local wait = tonumber(os.getenv("WRK_DELAY_MS") or "1")
function delay()
  return wait
end

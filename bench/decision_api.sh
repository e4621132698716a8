#!/usr/bin/env bash
# The decision API under load, on the memory store and on Redis, beside Redis's own
# ceiling for plain INCR, in one run:  bench/decision_api.sh [seconds]
# Needs wrk, redis-server, redis-cli and redis-benchmark (apt-get install wrk
# redis-server redis-tools). Everything listens on loopback only.
source "$(dirname "$0")/common.sh"

start_redis

rules='rules:
  - name: api
    algorithm: gcra
    limit: 1000000
    period: 1s'
printf 'store:\n  type: memory\n%s\n' "$rules" > "$dir/memory.yaml"
printf 'store:\n  type: redis\n  url: redis://127.0.0.1:%s\n  timeout: 1s\n%s\n' "$redis_port" "$rules" > "$dir/redis.yaml"


echo "== Redis ceiling: redis-benchmark -t incr -c 64 -n 400000"
redis-benchmark -p "$redis_port" -t incr -c 64 -n 400000 -q | tr '\r' '\n' | grep 'requests per second'
redis-benchmark -p "$redis_port" -t incr -c 64 -n 400000 -P 16 -q | tr '\r' '\n' | grep 'requests per second' | sed 's/^/(-P 16) /'
redis-cli -p "$redis_port" flushall >/dev/null

for store in memory redis; do
  serve_weir "$dir/$store.yaml"
  echo "== decision API, $store store: wrk -t2 -c64 -d${secs}s --latency"
  wrk -t2 -c64 -d"${secs}s" --latency -s bench/check.lua "$url" | grep -E 'Requests/sec|Latency|50%|90%|99%|Non-2xx|Socket errors'
  kill "$weir_pid"
done

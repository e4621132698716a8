#!/usr/bin/env bash
# How soon an idle weir's /readyz answers 503 after its Redis is killed:
#   bench/readyz_after_kill.sh [runs] [weir binary]
# Each run: one check answered (the worst case: the health loop's next look still sees
# it), a random 0-0.4 s of quiet, `kill -9` of redis-server, then /readyz polled every
# 5 ms until the first 503; Redis is started again before the next run. Prints each
# run's time and the largest. Builds target/dist/weir unless a binary is given.
[[ -n ${2:-} ]] && no_build=1
source "$(dirname "$0")/common.sh"
runs=${1:-10}
port=$(free_port)
cat > "$dir/weir.yaml" <<YAML
store:
  type: redis
  url: redis://127.0.0.1:$port
rules:
  - name: api
    algorithm: gcra
    limit: 1000
    period: 1s
YAML
start_redis() {
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no > /dev/null &
  redis_pid=$!
  pids+=("$redis_pid")
  until redis-cli -p "$port" ping > /dev/null 2>&1; do sleep 0.01; done
}
status() { curl -s -o /dev/null -w '%{http_code}' "$url/readyz"; }
start_redis
serve_weir "$dir/weir.yaml" "${2:-}"
worst=0
for run in $(seq "$runs"); do
  until [[ $(status) == 200 ]]; do sleep 0.02; done
  curl -s -o /dev/null "$url/v1/check" -d '{"rule": "api", "key": "k"}'
  sleep "0.$((RANDOM % 5))"
  kill -9 "$redis_pid"; wait "$redis_pid" 2>/dev/null || true
  t0=$(date +%s%N)
  until [[ $(status) == 503 ]]; do sleep 0.005; done
  took=$(( ($(date +%s%N) - t0) / 1000000 ))
  if (( took > worst )); then worst=$took; fi
  echo "run $run: first 503 after $took ms"
  start_redis
done
echo "largest: $worst ms"

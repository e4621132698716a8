#!/usr/bin/env bash
# HTTP stacks side by side (issue 41), like against like, in alternating rounds:
#   bench/stacks/run.sh SECONDS ROUNDS WEIR_A [WEIR_B]
# WEIR_A and WEIR_B are weir binaries (B_ENV="NAME=VALUE ..." is given to B's process
# alone); the Pingora gateway is bench/stacks/pingora's release build (PINGORA=BINARY
# for another; PINGORA=none leaves it out).
# 1. The gateway: wrk -t2 -c64 through nginx `limit_req` + `proxy_pass` (2 workers,
#    keep-alive to the upstream), each weir's gateway and the Pingora gateway (GCRA per
#    client IP, memory store, a limit nothing reaches; 2 threads each) to one upstream
#    (nginx answering "ok", 2 workers); then each paced at half of nginx's median
#    (gateway.sh's `paced`: 1 ms between a connection's requests, connections
#    calibrated per side).
# 2. The decision: nginx `limit_req` answering its 429 against each weir's
#    `POST /v1/check` answering 429 (bench/decision_vs_nginx.sh's shapes).
# Each round starts with a different side. Everything (wrk, the upstream, the servers)
# shares the machine's cores. Needs wrk and nginx.
set -euo pipefail
no_build=1
rounds=${2:-5}
weir_a=$(realpath "${3:?usage: bench/stacks/run.sh SECONDS ROUNDS WEIR_A [WEIR_B]}")
weir_b=${4:+$(realpath "$4")}
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/bench/common.sh"
cd "$root"
pingora=${PINGORA:-bench/stacks/pingora/target/release/weir-pingora-bench}

# One weir: `$1 serve` with the configuration $2, under the environment $3 (words);
# sets url.
start_weir() {
  local envs=()
  [[ -z ${3:-} ]] || read -ra envs <<< "$3"
  rm -f "$dir/out"
  env "${envs[@]}" "$1" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --config "$2" \
    > "$dir/out" 2>/dev/null &
  pids+=($!)
  until grep -q "weir listening" "$dir/out" 2>/dev/null; do sleep 0.05; done
  url=$(sed -n 's/^weir listening on //p' "$dir/out")
}

upstream=$(free_port); proxy=$(free_port); nginx429=$(free_port)
start_nginx "$(limit_req_proxy; cat <<NGINX
  limit_req_zone \$binary_remote_addr zone=deny:10m rate=1r/m;
  limit_req_status 429;
  # A content handler, not a return directive (which runs before the limit_req phase).
  server { listen 127.0.0.1:$nginx429; location / { limit_req zone=deny; empty_gif; } }
NGINX
)"
until curl -s "http://127.0.0.1:$upstream/" >/dev/null; do sleep 0.05; done
curl -s -o /dev/null "http://127.0.0.1:$nginx429/"

write_gateway_config
printf 'rules:\n  - {name: api, algorithm: gcra, limit: 1, period: 1d}\n' > "$dir/deny.yaml"

# The sides: name and URL of each gateway, and of each decision API.
declare -A gateway decision
gateway[nginx]="http://127.0.0.1:$proxy/"
decision[nginx]="http://127.0.0.1:$nginx429/"
start_weir "$weir_a" "$dir/weir.yaml"; gateway[weir_a]="$url/"
start_weir "$weir_a" "$dir/deny.yaml"; decision[weir_a]=$url
if [[ -n $weir_b ]]; then
  start_weir "$weir_b" "$dir/weir.yaml" "${B_ENV:-}"; gateway[weir_b]="$url/"
  start_weir "$weir_b" "$dir/deny.yaml" "${B_ENV:-}"; decision[weir_b]=$url
fi
if [[ $pingora != none ]]; then
  port=$(free_port)
  "$pingora" "127.0.0.1:$port" "127.0.0.1:$upstream" "$dir/weir.yaml" > "$dir/pingora.out" 2>&1 &
  pids+=($!)
  until curl -s "http://127.0.0.1:$port/" >/dev/null; do sleep 0.05; done
  gateway[pingora]="http://127.0.0.1:$port/"
fi
# One pass over the keys: from then on every check is denied.
for side in "${!decision[@]}"; do
  [[ $side == nginx ]] || wrk -t1 -c1 -d2s -s bench/check.lua "${decision[$side]}" >/dev/null
done

# Rounds of wrk against each side of $1 (gateway or decision), starting each round
# with the next side; $2 seconds each. Prints each run and each side's medians.
rounds() {
  local -n sides=$1
  local names=("${!sides[@]}") n=${#sides[@]}
  for name in "${names[@]}"; do : > "$dir/$1-$name.rps"; : > "$dir/$1-$name.p99"; done
  for round in $(seq "$rounds"); do
    for i in $(seq 0 $((n - 1))); do
      local name=${names[$(((round + i) % n))]} script=() out
      [[ $1 == decision && $name != nginx ]] && script=(-s bench/check.lua)
      out=$(wrk -t2 -c64 -d"$2s" --latency "${script[@]}" "${sides[$name]}")
      rps=$(sed -n 's/^Requests\/sec: *//p' <<< "$out")
      p99=$(awk '$1 == "99%" {print $2}' <<< "$out")
      echo "$rps" >> "$dir/$1-$name.rps"
      echo "$p99" >> "$dir/$1-$name.p99"
      echo "$1 round $round $name: $rps requests/s, p99 $p99, $(sed -n 's/^ *Non-2xx or 3xx responses: *//p' <<< "$out") non-2xx"
    done
  done
  for name in "${names[@]}"; do
    echo "$1 $name: median $(median < "$dir/$1-$name.rps") requests/s, p99 $(paste -sd' ' "$dir/$1-$name.p99")"
  done
}

echo "== the gateway, $rounds rounds of ${secs}s ($(date -u +%H:%M))"
rounds gateway "$secs"
half=$(python3 -c "print(round($(median < "$dir/gateway-nginx.rps") / 2))") half_of="nginx's median"
for side in "${!gateway[@]}"; do paced "$side" "${gateway[$side]}"; done
echo "== the decision, $rounds rounds of ${secs}s ($(date -u +%H:%M))"
rounds decision "$secs"

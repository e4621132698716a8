#!/usr/bin/env bash
# The decision API beside nginx's limit_req, both answering 429, in one run:
#   bench/decision_vs_nginx.sh [seconds] [rounds]
# nginx (2 workers) with `limit_req` keyed by client address at 1 a day answers every
# request after the first with its 429; weir's decision API (memory store, one thread
# per core) answers POST /v1/check for 10,000 keys in turn (bench/check.lua) under a
# rule of 1 a day, after one pass over the keys, with its 429 (JSON, RateLimit fields).
# wrk -t2 -c64 against each, alternating which goes first; medians and the ratio. wrk,
# nginx and weir share the machine's cores. Needs wrk and nginx.
source "$(dirname "$0")/common.sh"
rounds=${2:-5}

nginx_port=$(free_port)
start_nginx "$(cat <<NGINX
  limit_req_zone \$binary_remote_addr zone=perip:10m rate=1r/m;
  limit_req_status 429;
  # A content handler, not a return directive (which runs before the limit_req phase).
  server { listen 127.0.0.1:$nginx_port; location / { limit_req zone=perip; empty_gif; } }
NGINX
)"
until curl -s -o /dev/null "http://127.0.0.1:$nginx_port/"; do sleep 0.05; done

printf 'rules:\n  - {name: api, algorithm: gcra, limit: 1, period: 1d}\n' > "$dir/weir.yaml"
serve_weir "$dir/weir.yaml"
# One pass over the keys: from now on every check is denied.
wrk -t1 -c1 -d2s -s bench/check.lua "$url" >/dev/null

: > "$dir/nginx.rps"; : > "$dir/weir.rps"
for round in $(seq "$rounds"); do
  order="nginx weir"; (( round % 2 )) || order="weir nginx"
  for side in $order; do
    if [[ $side == nginx ]]; then
      out=$(wrk -t2 -c64 -d"${secs}s" --latency "http://127.0.0.1:$nginx_port/")
    else
      out=$(wrk -t2 -c64 -d"${secs}s" --latency -s bench/check.lua "$url")
    fi
    rps=$(sed -n 's/^Requests\/sec: *//p' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    non429=$(sed -n 's/^ *Non-2xx or 3xx responses: *//p' <<<"$out")
    echo "$rps" >> "$dir/$side.rps"
    echo "round $round $side: $rps requests/s, p99 $p99 ($non429 answered 429)"
  done
done
n=$(median < "$dir/nginx.rps"); w=$(median < "$dir/weir.rps")
echo "medians: nginx $n, weir $w requests/s; weir/nginx $(python3 -c "print(round($w / $n, 3))")"

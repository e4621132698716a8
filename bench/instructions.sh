#!/usr/bin/env bash
# Instructions per request of two servers, counted by valgrind (callgrind), not timed:
# the same binary and load give the same count whatever else the machine runs, so a
# change of a few percent shows where wrk's timings (±10% between rounds on two shared
# cores) cannot.
#   [AB_DOOR=gateway|api|api429] bench/instructions.sh A B [requests]
# A and B are weir binaries, or `nginx` for the peer the door is measured against:
# - gateway: GET / through to nginx answering "ok"; the peer is nginx with
#   `limit_req` (a rate nothing reaches) and `proxy_pass` with keep-alive.
# - api: POST /v1/check for 10,000 keys in turn, every check admitted (weir only).
# - api429: POST /v1/check of one key over its limit, every check denied (429, JSON,
#   RateLimit fields); the peer is nginx's `limit_req` answering its 429, keyed by
#   the client's address (one key), as bench/decision_vs_nginx.sh runs it.
# Each server runs under callgrind (every thread; nginx as one process, no master); a
# client sends `requests` then `2 × requests` keep-alive requests in two runs. The
# difference between the two runs' totals, divided by `requests`, is the cost of a
# request without start-up and shutdown. Background timers make the totals of two runs
# differ by a few million instructions: use 8,000 requests or more (the default) so
# that this stays under 1%. Needs valgrind (and nginx for the gateway or the peer).
side_path() { [[ $1 == nginx ]] && echo nginx || realpath "$1" 2>/dev/null || true; }
a=$(side_path "${1:-}"); b=$(side_path "${2:-}")
runnable() { [[ $1 == nginx || -x $1 ]]; }
runnable "$a" && runnable "$b" || { echo "usage: [AB_DOOR=gateway|api|api429] bench/instructions.sh A B [requests]  (A, B: weir binaries or nginx)" >&2; exit 2; }
no_build=1
source "$(dirname "$0")/common.sh"
n=${3:-8000}
door=${AB_DOOR:-gateway}

case $door in
  api) printf 'rules:\n  - {name: api, algorithm: gcra, limit: 1000000000, period: 1s}\n' > "$dir/weir.yaml" ;;
  api429) printf 'rules:\n  - {name: api, algorithm: gcra, limit: 1, period: 1d}\n' > "$dir/weir.yaml" ;;
  gateway) start_upstream 1; write_gateway_config ;;
  *) echo "AB_DOOR: gateway, api or api429" >&2; exit 2 ;;
esac

# The peer's configuration for the door, on port $1: one process serving.
write_peer_config() {
  local location
  case $door in
    api429) location="limit_req zone=perip; empty_gif;" ;;
    gateway) location="limit_req zone=perip burst=1000000000 nodelay; proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection \"\";" ;;
    *) echo "no nginx peer for AB_DOOR=$door" >&2; exit 2 ;;
  esac
  local rate=1r/m
  [[ $door == gateway ]] && rate=1000000000r/s
  cat > "$dir/peer.conf" <<NGINX
daemon off;
master_process off;
worker_processes 1;
error_log $dir/peer-error.log crit;
pid $dir/peer.pid;
events { worker_connections 1024; }
http {
  access_log off;
  limit_req_zone \$binary_remote_addr zone=perip:10m rate=$rate;
  limit_req_status 429;
  upstream up { server 127.0.0.1:${upstream:-1}; keepalive 16; }
  server { listen 127.0.0.1:$1; location / { $location } }
}
NGINX
}

# Sends $2 requests to $1 over one keep-alive connection.
client() {
  python3 - "$1" "$2" "$door" <<'PY'
import http.client, sys, urllib.parse
url, n, door = urllib.parse.urlparse(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = http.client.HTTPConnection(url.hostname, url.port)
for i in range(n):
    if door == "gateway":
        c.request("GET", "/")
    else:
        key = "user-%d" % (i % 10000) if door == "api" else "user-1"
        c.request("POST", "/v1/check", body='{"rule":"api","key":"%s"}' % key,
                  headers={"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    # api429: the first request of a run fits the limit (both runs have one).
    expected = 429 if door == "api429" and i > 0 else None if door == "api429" else 200
    assert expected is None or r.status == expected, r.status
PY
}

# Instructions (Ir) of server $1 (a weir binary, or nginx) serving $2 requests.
count() {
  local out="$dir/callgrind.out" pid address
  rm -f "$dir/out" "$out"
  if [[ $1 == nginx ]]; then
    local port; port=$(free_port)
    write_peer_config "$port"
    valgrind --tool=callgrind --callgrind-out-file="$out" nginx -p "$dir" -c "$dir/peer.conf" \
      > "$dir/out" 2>/dev/null &
    pid=$!
    # A connection alone, no request: the runs must differ by their requests only.
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.1; done
    address="http://127.0.0.1:$port"
  else
    valgrind --tool=callgrind --callgrind-out-file="$out" "$1" serve --listen 127.0.0.1:0 \
      --admin-listen 127.0.0.1:0 --config "$dir/weir.yaml" > "$dir/out" 2>/dev/null &
    pid=$!
    until grep -q "weir listening" "$dir/out" 2>/dev/null; do sleep 0.1; done
    address=$(sed -n 's/^weir listening on //p' "$dir/out")
  fi
  client "$address" "$2"
  kill -TERM "$pid"; wait "$pid" || true
  awk '/^summary:/ {print $2}' "$out"
}

for side in A B; do
  bin=$a; [[ $side == B ]] && bin=$b
  one=$(count "$bin" "$n"); two=$(count "$bin" "$((2 * n))")
  per=$(( (two - one) / n ))
  echo "$side: $per instructions per request ($one for $n requests, $two for $((2 * n)))"
  eval "per_$side=$per"
done
echo "B/A: $(python3 -c "print(round($per_B / $per_A, 3))")"

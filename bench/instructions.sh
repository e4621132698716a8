#!/usr/bin/env bash
# Instructions per request of two servers, counted by valgrind (callgrind), not timed:
# the same binary and load give the same count whatever else the machine runs, so a
# change of a few percent shows where wrk's timings (±10% between rounds on two shared
# cores) cannot.
#   [AB_DOOR=gateway|api|api429|grpc] bench/instructions.sh A B [requests]
# A and B are weir binaries, `nginx` for the peer the door is measured against, or
# `pingora:BINARY` for weir's engine on Pingora (bench/stacks/pingora, gateway only):
# - gateway: GET / through to nginx answering "ok"; the peer is nginx with
#   `limit_req` (a rate nothing reaches) and `proxy_pass` with keep-alive.
# - api: POST /v1/check for 10,000 keys in turn, every check admitted (weir only).
# - api429: POST /v1/check of one key over its limit, every check denied (429, JSON,
#   RateLimit fields); the peer is nginx's `limit_req` answering its 429, keyed by
#   the client's address (one key), as bench/decision_vs_nginx.sh runs it.
# - grpc: Envoy's `ShouldRateLimit` with one descriptor (one key, every call
#   admitted), from h2load (nghttp2-client) over one HTTP/2 connection, one call in
#   flight: a lightly loaded Envoy worker's shape (weir only; `api` is its peer).
# Each server runs under callgrind (every thread; nginx as one process, no master); a
# client sends `requests` then `2 × requests` keep-alive requests in two runs. The
# difference between the two runs' totals, divided by `requests`, is the cost of a
# request without start-up and shutdown. Background timers make the totals of two runs
# differ by a few million instructions: use 8,000 requests or more (the default) so
# that this stays under 1%. Needs valgrind (and nginx for the gateway or the peer, h2load
# for grpc).
# With AB_PROFILE=DIR, both runs' callgrind outputs are kept there (A-8000.out,
# A-16000.out, ...) for bench/per_function.sh, which splits a request's instructions by
# function.
side_path() {
  case $1 in
    nginx) echo nginx ;;
    pingora:*) echo "pingora:$(realpath "${1#pingora:}" 2>/dev/null)" ;;
    *) realpath "$1" 2>/dev/null || true ;;
  esac
}
a=$(side_path "${1:-}"); b=$(side_path "${2:-}")
runnable() { [[ $1 == nginx || ( $1 == pingora:* && -x ${1#pingora:} ) || -x $1 ]]; }
runnable "$a" && runnable "$b" || { echo "usage: [AB_DOOR=gateway|api|api429|grpc] bench/instructions.sh A B [requests]  (A, B: weir binaries, nginx, or pingora:BINARY)" >&2; exit 2; }
no_build=1
source "$(dirname "$0")/common.sh"
n=${3:-8000}
door=${AB_DOOR:-gateway}

case $door in
  api) printf 'rules:\n  - {name: api, algorithm: gcra, limit: 1000000000, period: 1s}\n' > "$dir/weir.yaml" ;;
  api429) printf 'rules:\n  - {name: api, algorithm: gcra, limit: 1, period: 1d}\n' > "$dir/weir.yaml" ;;
  gateway) start_upstream 1; write_gateway_config ;;
  grpc)
    mkdir -p "$dir/rl"
    printf 'domain: bench\ndescriptors:\n  - key: d0\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n' > "$dir/rl/bench.yaml"
    printf 'store:\n  type: memory\nenvoy:\n  config_dir: rl\n' > "$dir/weir.yaml"
    # One call's message, framed for gRPC: domain `bench`, descriptor (d0, user-1).
    python3 - "$dir/call" <<'PY'
import sys
def field(number, value): return bytes([number << 3 | 2, len(value)]) + value
message = field(1, b"bench") + field(2, field(1, field(1, b"d0") + field(2, b"user-1")))
open(sys.argv[1], "wb").write(b"\0" + len(message).to_bytes(4, "big") + message)
PY
    ;;
  *) echo "AB_DOOR: gateway, api, api429 or grpc" >&2; exit 2 ;;
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
  if [[ $door == grpc ]]; then
    local path=/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit out
    # The message must be answered OK (h2load sees HTTP statuses only, and a refused
    # call is a 200 with a grpc-status trailer).
    curl -sv --http2-prior-knowledge -H 'content-type: application/grpc' -H 'te: trailers' \
      --data-binary @"$dir/call" "http://$1$path" -o /dev/null 2>&1 | grep -q '^< grpc-status: 0' \
      || { echo "the gRPC call was not answered OK" >&2; exit 1; }
    out=$(h2load -n "$(($2 - 1))" -c 1 -m 1 -d "$dir/call" -H 'content-type: application/grpc' \
      -H 'te: trailers' "http://$1$path")
    grep -q "$(($2 - 1)) succeeded" <<< "$out" || { echo "$out" >&2; exit 1; }
    return
  fi
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
  elif [[ $1 == pingora:* ]]; then
    [[ $door == gateway ]] || { echo "pingora: AB_DOOR=gateway only" >&2; exit 2; }
    local port; port=$(free_port)
    valgrind --tool=callgrind --callgrind-out-file="$out" "${1#pingora:}" "127.0.0.1:$port" \
      "127.0.0.1:$upstream" "$dir/weir.yaml" > "$dir/out" 2>/dev/null &
    pid=$!
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.1; done
    address="http://127.0.0.1:$port"
  else
    local grpc=()
    [[ $door == grpc ]] && grpc=(--grpc-listen 127.0.0.1:0)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$1" serve --listen 127.0.0.1:0 \
      --admin-listen 127.0.0.1:0 "${grpc[@]}" --config "$dir/weir.yaml" > "$dir/out" 2>/dev/null &
    pid=$!
    until grep -q "weir listening" "$dir/out" 2>/dev/null; do sleep 0.1; done
    address=$(sed -n 's/^weir listening on //p' "$dir/out")
    if [[ $door == grpc ]]; then
      until grep -q "weir grpc listening" "$dir/out" 2>/dev/null; do sleep 0.1; done
      address=$(sed -n 's/^weir grpc listening on //p' "$dir/out")
    fi
  fi
  client "$address" "$2"
  kill -TERM "$pid"; wait "$pid" || true
  [[ -z ${AB_PROFILE:-} ]] || cp "$out" "$AB_PROFILE/$side-$2.out"
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

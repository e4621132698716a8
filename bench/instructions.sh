#!/usr/bin/env bash
# Instructions per request of two weir binaries, counted by valgrind (callgrind), not
# timed: the same binary and load give the same count whatever else the machine runs,
# so a change of a few percent shows where wrk's timings (±10% between rounds on two
# shared cores) cannot.
#   [AB_DOOR=gateway|api] bench/instructions.sh OLD_BINARY NEW_BINARY [requests]
# Each binary runs under callgrind (both its server threads, instrumented); a client
# sends `requests` then `2 × requests` keep-alive requests in two runs (gateway: GET /
# through to nginx answering "ok"; api: POST /v1/check for 10,000 keys in turn). The
# difference between the two runs' totals, divided by `requests`, is the cost of a
# request without start-up and shutdown. Background timers make the totals of two runs
# differ by a few million instructions: use 8,000 requests or more (the default) so
# that this stays under 1%. Needs valgrind (and nginx for the gateway).
a=$(realpath "${1:-}" 2>/dev/null || true); b=$(realpath "${2:-}" 2>/dev/null || true)
[[ -x "$a" && -x "$b" ]] || { echo "usage: [AB_DOOR=gateway|api] bench/instructions.sh OLD_BINARY NEW_BINARY [requests]" >&2; exit 2; }
no_build=1
source "$(dirname "$0")/common.sh"
n=${3:-8000}
door=${AB_DOOR:-gateway}

if [[ $door == api ]]; then
  printf 'rules:\n  - {name: api, algorithm: gcra, limit: 1000000000, period: 1s}\n' > "$dir/weir.yaml"
else
  start_upstream 1
  write_gateway_config
fi

# Sends $2 requests to $1 over one keep-alive connection.
client() {
  python3 - "$1" "$2" "$door" <<'PY'
import http.client, sys, urllib.parse
url, n, door = urllib.parse.urlparse(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = http.client.HTTPConnection(url.hostname, url.port)
for i in range(n):
    if door == "api":
        c.request("POST", "/v1/check", body='{"rule":"api","key":"user-%d"}' % (i % 10000),
                  headers={"Content-Type": "application/json"})
    else:
        c.request("GET", "/")
    r = c.getresponse(); r.read()
    assert r.status == 200, r.status
PY
}

# Instructions (Ir) of binary $1 serving $2 requests.
count() {
  local out="$dir/callgrind.out"
  rm -f "$dir/out" "$out"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$1" serve --listen 127.0.0.1:0 \
    --admin-listen 127.0.0.1:0 --config "$dir/weir.yaml" > "$dir/out" 2>/dev/null &
  local pid=$!
  until grep -q "weir listening" "$dir/out" 2>/dev/null; do sleep 0.1; done
  client "$(sed -n 's/^weir listening on //p' "$dir/out")" "$2"
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

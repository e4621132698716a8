# Shared by the bench/ scripts (sourced, not run): builds weir with the `dist` profile
# (fat LTO, one codegen unit: target/dist/weir, what we ship), makes a temporary
# directory, and stops every process started through `pids` on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
# bench/ab.sh brings its own binaries.
[[ -n ${no_build:-} ]] || cargo build --profile dist -q -p weir
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT

# The median of the numbers on standard input, one a line.
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts weir (the binary $2, by default this checkout's) with the configuration $1;
# sets weir_pid and url (the main listener). Not in a subshell, so that the pid is kept.
serve_weir() {
  rm -f "$dir/out"
  "${2:-./target/dist/weir}" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --config "$1" > "$dir/out" 2>/dev/null &
  weir_pid=$!
  pids+=("$weir_pid")
  until grep -q "weir listening" "$dir/out" 2>/dev/null; do sleep 0.05; done
  url=$(sed -n 's/^weir listening on //p' "$dir/out")
}

# Starts nginx (2 workers, no access log, errors from `crit` up: a 429 of `limit_req`
# is not logged) with the `http` block's body $1; its configuration is $dir/$2.conf
# (default nginx). Callers wait for the ports they serve.
start_nginx() {
  local conf="$dir/${2:-nginx}.conf"
  mkdir -p "$dir/logs"
  cat > "$conf" <<NGINX
worker_processes 2;
error_log $dir/logs/${2:-nginx}.log crit;
pid $dir/${2:-nginx}.pid;
events { worker_connections 4096; }
http {
  access_log off;
$1
}
NGINX
  nginx -p "$dir" -c "$conf" -g 'daemon off;' &
  pids+=($!)
}

# The gateway's peer, for start_nginx: nginx answering "ok" on port $upstream, and on
# $proxy a reverse proxy to it with `limit_req` by client address (a limit nothing
# reaches) and keep-alive to the upstream.
limit_req_proxy() {
  cat <<NGINX
  limit_req_zone \$binary_remote_addr zone=perip:10m rate=1000000r/s;
  upstream app { server 127.0.0.1:$upstream; keepalive 64; }
  server { listen 127.0.0.1:$upstream; location / { return 200 "ok\n"; } }
  server {
    listen 127.0.0.1:$proxy;
    location / {
      limit_req zone=perip burst=1000000 nodelay;
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
NGINX
}

# Starts nginx answering "ok" itself on a free port with $1 workers (default 2); sets
# upstream.
start_upstream() {
  upstream=$(free_port)
  mkdir -p "$dir/logs"
  cat > "$dir/upstream.conf" <<NGINX
worker_processes ${1:-2};
error_log $dir/logs/error.log warn;
pid $dir/upstream.pid;
events { worker_connections 4096; }
http { access_log off; server { listen 127.0.0.1:$upstream; location / { return 200 "ok\n"; } } }
NGINX
  nginx -p "$dir" -c "$dir/upstream.conf" -g 'daemon off;' &
  pids+=($!)
  until curl -s "http://127.0.0.1:$upstream/" >/dev/null; do sleep 0.05; done
}

# Writes $dir/weir.yaml: the gateway to $upstream, with GCRA per client IP at a limit
# nothing reaches (what the gateway benchmarks measure is the check and the proxying).
write_gateway_config() {
  { printf 'upstream:\n  url: http://127.0.0.1:%s\n' "$upstream"; perip_rules; } > "$dir/weir.yaml"
}

# The benchmarks' rules: GCRA per client IP at a limit nothing reaches.
perip_rules() {
  cat <<YAML
rules:
  - name: perip
    match: { path_prefix: / }
    key: [client_ip]
    algorithm: gcra
    limit: 1000000000
    period: 1s
YAML
}

# Starts redis-server on a free port, in memory only; sets redis_port and redis_pid.
start_redis() {
  redis_port=$(free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" >/dev/null &
  redis_pid=$!
  pids+=("$redis_pid")
  until redis-cli -p "$redis_port" ping >/dev/null 2>&1; do sleep 0.05; done
}

# For the Envoy benchmarks: $dir/rl/bench.yaml (domain `bench`, descriptors d0-d2,
# each a fixed window of 10^9 a second, so that nothing is denied), and weir's
# configurations on it, each with a rule `api` of the same kind for `/v1/check`:
# $dir/memory.yaml, $dir/redis.yaml (Lua) and $dir/redis_counters.yaml
# (`window_counters`), the last two on the Redis of start_redis.
write_envoy_bench_configs() {
  mkdir -p "$dir/rl"
  cat > "$dir/rl/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: d0
    rate_limit: { unit: second, requests_per_unit: 1000000000 }
  - key: d1
    rate_limit: { unit: second, requests_per_unit: 1000000000 }
  - key: d2
    rate_limit: { unit: second, requests_per_unit: 1000000000 }
YAML
  local body='envoy:
  config_dir: rl
rules:
  - name: api
    algorithm: fixed_window
    limit: 1000000000
    period: 1s'
  printf 'store:\n  type: memory\n%s\n' "$body" > "$dir/memory.yaml"
  printf 'store:\n  type: redis\n  url: redis://127.0.0.1:%s\n  timeout: 1s\n%s\n' "$redis_port" "$body" > "$dir/redis.yaml"
  printf 'store:\n  type: redis\n  url: redis://127.0.0.1:%s\n  timeout: 1s\n  clock: local\n  window_counters: true\n%s\n' "$redis_port" "$body" > "$dir/redis_counters.yaml"
}

# wrk at full load (2 threads, 64 connections, $secs s) against the URL $2, named $1;
# its whole output is kept in $dir/last (last_rps reads its requests a second).
run() {
  echo "== $1: wrk -t2 -c64 -d${secs}s --latency $2"
  wrk -t2 -c64 -d"${secs}s" --latency "$2" | tee "$dir/last" | grep -E 'Requests/sec|50%|90%|99%|Non-2xx|Socket errors'
}
last_rps() { sed -n 's/^Requests\/sec: *//p' "$dir/last"; }

# wrk paced at about $half requests a second (set it first; $half_of says of what)
# against the URL $2, named $1: each connection waits 1 ms between requests, and the
# number of connections is calibrated (2 s runs, twice) so that each target gets about
# the same rate.
paced() {
  local connections=32
  for _ in 1 2; do
    connections=$(python3 -c "print(max(2, round($connections * $half / $(WRK_DELAY_MS=1 wrk -t2 -c"$connections" -d2s -s bench/paced.lua "$2" | sed -n 's/^Requests\/sec: *//p'))))")
  done
  echo "== paced at ~$half requests/s (half of $half_of), $connections connections 1 ms apart: $1"
  WRK_DELAY_MS=1 wrk -t2 -c"$connections" -d"${secs}s" --latency -s bench/paced.lua "$2" | grep -E 'Requests/sec|50%|90%|99%|Non-2xx|Socket errors'
}


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
  cat > "$dir/weir.yaml" <<YAML
upstream:
  url: http://127.0.0.1:$upstream
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

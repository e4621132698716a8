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

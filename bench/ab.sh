#!/usr/bin/env bash
# Two weir gateway binaries side by side, to measure one change on a noisy machine:
#   bench/ab.sh OLD_BINARY NEW_BINARY [seconds] [rounds]
# Both proxy to one upstream (nginx answering "ok" itself), with the same configuration
# as bench/gateway.sh. Each round runs wrk (2 threads, 64 connections) against A, then
# B, so that drifts in the machine's load hit both alike. Then, paced at the same load
# (40 connections, 1 ms apart), each binary's CPU time per request, from `perf stat -e
# task-clock` on its process (skipped without perf). Needs wrk and nginx.
a=$(realpath "${1:-}" 2>/dev/null || true); b=$(realpath "${2:-}" 2>/dev/null || true)
[[ -x "$a" && -x "$b" ]] || { echo "usage: bench/ab.sh OLD_BINARY NEW_BINARY [seconds] [rounds]" >&2; exit 2; }
source "$(dirname "$0")/common.sh"
secs=${3:-5}; rounds=${4:-4}

upstream=$(free_port)
mkdir -p "$dir/logs"
cat > "$dir/nginx.conf" <<NGINX
worker_processes 2;
error_log $dir/logs/error.log warn;
pid $dir/nginx.pid;
events { worker_connections 4096; }
http { access_log off; server { listen 127.0.0.1:$upstream; location / { return 200 "ok\n"; } } }
NGINX
nginx -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' &
pids+=($!)
until curl -s "http://127.0.0.1:$upstream/" >/dev/null; do sleep 0.05; done
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
serve_weir "$dir/weir.yaml" "$a"; a_pid=$weir_pid; a_url=$url
serve_weir "$dir/weir.yaml" "$b"; b_pid=$weir_pid; b_url=$url

for round in $(seq "$rounds"); do
  for side in A B; do
    target=$a_url; [[ $side == B ]] && target=$b_url
    rps=$(wrk -t2 -c64 -d"${secs}s" "$target/" | sed -n 's/^Requests\/sec: *//p')
    echo "round $round $side: $rps requests/s"
  done
done

command -v perf >/dev/null || exit 0
export WRK_DELAY_MS=1
for round in $(seq "$rounds"); do
  for side in A B; do
    target=$a_url; pid=$a_pid
    [[ $side == B ]] && { target=$b_url; pid=$b_pid; }
    perf stat -e task-clock -p "$pid" -o "$dir/stat" -- sleep "$((secs + 1))" &
    stat=$!
    n=$(wrk -t2 -c40 -d"${secs}s" -s bench/paced.lua "$target/" | awk '/requests in/{print $1}')
    wait "$stat"
    ms=$(awk '/task-clock/{gsub(",","",$1); print $1}' "$dir/stat")
    echo "round $round $side: $(python3 -c "print(round($ms * 1000 / $n, 2))") µs CPU per request (paced, $n requests)"
  done
done

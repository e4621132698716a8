#!/usr/bin/env bash
# The gateway over TLS beside nginx, in one run:  bench/tls.sh [seconds] [rounds]
# Both terminate TLS with the same ECDSA P-256 certificate (made here by openssl), and
# proxy to the same upstream (nginx answering "ok" itself, one worker). The peer is nginx
# with 2 workers, `limit_req` keyed by client address on `/`, and `limit_conn` as well on
# `/inflight/`; weir is the gateway (memory store) with GCRA per client address on `/`,
# and an `algorithm: concurrency` rule as well on `/inflight/`. Limits are set so that
# nothing is denied: what is measured is the handshakes, the protocols and the checks.
#
# Measured, each round alternating the peers (the medians of the rounds are printed):
#   1. full handshakes per second: two `openssl s_time -new` clients (TLS 1.3), no request;
#   2. HTTP/1.1 over TLS: wrk -t2 -c64, on `/` and on `/inflight/`;
#   3. HTTP/2 over TLS: h2load, 16 connections of 8 streams, on `/` and `/inflight/`;
#   4. paced p99: wrk over TLS at half of nginx's HTTP/1.1 rate (1 ms between requests
#      on each connection, the connections calibrated so each peer gets that rate).
# Needs nginx, wrk, h2load and openssl (apt-get install nginx-light wrk nghttp2-client).
source "$(dirname "$0")/common.sh"
rounds=${2:-3}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=bench.test -addext subjectAltName=DNS:bench.test,IP:127.0.0.1 \
  -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null

start_upstream 1
nginx_port=$(free_port)
start_nginx "$(cat <<NGINX
  limit_req_zone \$binary_remote_addr zone=perip:10m rate=1000000r/s;
  limit_conn_zone \$binary_remote_addr zone=inflight:10m;
  upstream app { server 127.0.0.1:$upstream; keepalive 64; }
  server {
    listen 127.0.0.1:$nginx_port ssl http2;
    ssl_certificate $dir/cert.pem;
    ssl_certificate_key $dir/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    keepalive_requests 100000000;   # not 1,000 and a new handshake: weir has no such cap
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location / {
      limit_req zone=perip burst=1000000 nodelay;
      proxy_pass http://app;
    }
    location /inflight/ {
      limit_req zone=perip burst=1000000 nodelay;
      limit_conn inflight 10000;
      proxy_pass http://app;
    }
  }
NGINX
)"
until curl -sk "https://127.0.0.1:$nginx_port/" >/dev/null; do sleep 0.05; done

{
  printf 'upstream:\n  url: http://127.0.0.1:%s\n' "$upstream"
  printf 'tls:\n  certificates:\n    - { cert_file: %s, key_file: %s }\n' "$dir/cert.pem" "$dir/key.pem"
  perip_rules
  cat <<YAML
  - name: inflight
    match: { path_prefix: /inflight/ }
    key: [client_ip]
    algorithm: concurrency
    limit: 10000
YAML
} > "$dir/weir.yaml"
serve_weir "$dir/weir.yaml"
weir_port=${url##*:}

declare -A port=([nginx]=$nginx_port [weir]=$weir_port)
results=$dir/results
: > "$results"
record() { echo "$1	$2	$3" >> "$results"; echo "   $1, $2: $3"; }

# Full handshakes a second: two s_time clients at once for $secs, connections counted.
handshakes() {
  local out=()
  for i in 1 2; do
    openssl s_time -connect "127.0.0.1:$2" -new -time "$secs" > "$dir/stime$i" 2>&1 &
    out+=($!)
  done
  wait "${out[@]}"
  local total
  total=$(cat "$dir/stime1" "$dir/stime2" | awk '/connections in [0-9.]+s/ {n += $1} END {print n}')
  record handshakes/s "$1" "$(python3 -c "print(round($total / $secs))")"
}

h1() {
  wrk -t2 -c64 -d"${secs}s" --latency "https://127.0.0.1:$2$3" > "$dir/last"
  grep -qE 'Non-2xx|Socket errors' "$dir/last" && { cat "$dir/last"; exit 1; }
  record "h1 $3 req/s" "$1" "$(last_rps)"
}

h2() {
  h2load -t1 -c16 -m8 -D "$secs" "https://127.0.0.1:$2$3" > "$dir/last" 2>&1
  grep -q 'status codes: [0-9]* 2xx, 0 3xx, 0 4xx, 0 5xx' "$dir/last" || { cat "$dir/last"; exit 1; }
  record "h2 $3 req/s" "$1" "$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' "$dir/last")"
}

for round in $(seq "$rounds"); do
  echo "== round $round"
  for peer in nginx weir; do handshakes "$peer" "${port[$peer]}"; done
  for path in / /inflight/x; do
    for peer in nginx weir; do h1 "$peer" "${port[$peer]}" "$path"; done
    for peer in nginx weir; do h2 "$peer" "${port[$peer]}" "$path"; done
  done
done

half=$(awk -F'\t' '$1 == "h1 / req/s" && $2 == "nginx" {print $3}' "$results" | median)
half=$(python3 -c "print(round($half / 2))") half_of="nginx's HTTP/1.1 over TLS"
for peer in nginx weir; do
  paced "$peer over TLS" "https://127.0.0.1:${port[$peer]}/"
done

echo "== medians of $rounds rounds (weir / nginx)"
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    what, peer, value = line.rstrip('\n').split('\t')
    rows.setdefault(what, {}).setdefault(peer, []).append(float(value))
for what, peers in rows.items():
    n, w = statistics.median(peers['nginx']), statistics.median(peers['weir'])
    print(f"{what:24} nginx {n:10.0f}  weir {w:10.0f}  ratio {w / n:.2f}")
PY

#!/usr/bin/env bash
# nginx asking weir's forward-auth door, beside nginx alone, nginx's own limit_req and
# weir's gateway, in one run:  bench/forward_auth.sh [seconds]
# wrk (2 threads, 64 connections) against
#   1. the upstream directly (nginx answering "ok" itself),
#   2. nginx as a reverse proxy to it, no limit,
#   3. nginx with limit_req (keyed by client address),
#   4. nginx with auth_request to weir's /v1/auth: examples/forward-auth/nginx.conf as
#      it ships (keep-alive to weir and to the upstream), weir on the memory store,
#      convention `original`, GCRA keyed by client IP,
#   5. weir's gateway (the same rule) to the upstream.
# Limits are high enough that nothing is denied: this measures the check and the
# proxying. Then each paced at half of nginx limit_req's throughput (connections 1 ms
# apart, calibrated per target). Needs wrk and nginx (apt-get install wrk nginx-light).
source "$(dirname "$0")/common.sh"

start_upstream 2
proxy=$(free_port); limited=$(free_port); fronted=$(free_port); auth=$(free_port)

# 2 and 3: nginx alone and nginx limit_req, one nginx of 2 workers.
start_nginx "$(cat <<NGINX
  limit_req_zone \$binary_remote_addr zone=perip:10m rate=1000000r/s;
  upstream app { server 127.0.0.1:$upstream; keepalive 64; }
  server {
    listen 127.0.0.1:$proxy;
    location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen 127.0.0.1:$limited;
    location / {
      limit_req zone=perip burst=1000000 nodelay;
      proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection "";
    }
  }
NGINX
)"

# 4: the shipped example, its ports moved, no access log (as 2 and 3), 2 workers.
sed -e "s/127.0.0.1:8082/127.0.0.1:$auth/; s/127.0.0.1:8000/127.0.0.1:$upstream/" \
  -e "s/127.0.0.1:10000/127.0.0.1:$fronted/" -e "s/^worker_processes auto;/worker_processes 2;/" \
  -e "s/^http {/http {\n    access_log off;/" \
  examples/forward-auth/nginx.conf > "$dir/fronted.conf"
nginx -p "$dir" -c "$dir/fronted.conf" -g "daemon off; pid $dir/fronted.pid; error_log $dir/logs/fronted.log warn;" &
pids+=($!)

{
  printf 'auth:\n  convention: original\n  trusted_proxies: [127.0.0.1/32]\n  denied_status: 403\n'
  perip_rules
} > "$dir/auth.yaml"
./target/dist/weir serve --listen 127.0.0.1:0 --auth-listen "127.0.0.1:$auth" --config "$dir/auth.yaml" >/dev/null 2>&1 &
pids+=($!)

write_gateway_config
serve_weir "$dir/weir.yaml"
gateway=$url
for port in $proxy $limited $fronted; do
  until curl -sf "http://127.0.0.1:$port/" >/dev/null; do sleep 0.05; done
done

run "upstream directly" "http://127.0.0.1:$upstream/"
run "nginx alone" "http://127.0.0.1:$proxy/"
run "nginx limit_req" "http://127.0.0.1:$limited/"
limit_req_rps=$(last_rps)
run "nginx + weir /v1/auth" "http://127.0.0.1:$fronted/"
run "weir gateway" "$gateway/"

half=$(python3 -c "print(round($limit_req_rps / 2))") half_of="nginx limit_req"
paced "upstream directly" "http://127.0.0.1:$upstream/"
paced "nginx alone" "http://127.0.0.1:$proxy/"
paced "nginx limit_req" "http://127.0.0.1:$limited/"
paced "nginx + weir /v1/auth" "http://127.0.0.1:$fronted/"
paced "weir gateway" "$gateway/"

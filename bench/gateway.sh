#!/usr/bin/env bash
# The gateway under load beside nginx's limit_req, in one run:  bench/gateway.sh [seconds]
# wrk (2 threads, 64 connections) against
#   1. the upstream directly (nginx answering "ok" itself),
#   2. nginx as a reverse proxy with limit_req (keyed by client address) to that upstream,
#   3. weir's gateway (GCRA keyed by client IP, memory store) to that upstream.
# The limits are set high enough that nothing is denied: this measures the cost of the
# check and the proxying. Needs wrk and nginx (apt-get install wrk nginx-light).
source "$(dirname "$0")/common.sh"

upstream=$(free_port); proxy=$(free_port)
start_nginx "$(limit_req_proxy)"
until curl -s "http://127.0.0.1:$upstream/" >/dev/null; do sleep 0.05; done

write_gateway_config
serve_weir "$dir/weir.yaml"
weir=$url

run "upstream directly" "http://127.0.0.1:$upstream/"
run "nginx limit_req" "http://127.0.0.1:$proxy/"
nginx_rps=$(last_rps)
run "weir gateway" "$weir/"

# Half of nginx's throughput, paced: each connection waits 1 ms between requests, and
# the number of connections is calibrated (2 s runs, twice) so that each target gets
# about the same rate, half of nginx's. nginx is paced too, as the peer.
half=$(python3 -c "print(round($nginx_rps / 2))") half_of=nginx
paced "upstream directly" "http://127.0.0.1:$upstream/"
paced "nginx limit_req" "http://127.0.0.1:$proxy/"
paced "weir gateway" "$weir/"

#!/usr/bin/env bash
# Envoy's rate limit service under load, beside the decision API in the same run:
#   bench/envoy_grpc.sh [seconds]
# For the memory store (gRPC on a thread per core, then on the runtime's pool), Redis
# (Lua, FCALL) and Redis with `window_counters` (INCRBY +
# PEXPIRE, envoyproxy/ratelimit's own commands): ShouldRateLimit flat out from
# crates/weir/examples/rls_load.rs (64 tasks over 4 HTTP/2 connections, one thread)
# with 1 and 3 descriptors, then POST /v1/check from wrk (2 threads, 64 connections)
# on the same weir and the same kind of limit (a fixed window). Prints the rates and
# latencies, weir's CPU per call (utime + stime from /proc, over the run) and, on
# Redis, Redis's CPU per decision (per descriptor checked). Then both doors paced to one
# rate: 64 callers each, each waiting $pace ms (5) between its calls (rls_load's delay,
# wrk's WRK_DELAY_MS), one descriptor against one check; the gRPC callers over 4
# HTTP/2 connections (16 calls in flight on each, as a busy Envoy multiplexes them) and
# over 64 (one each: connection for connection against wrk's 64). Needs wrk,
# redis-server, redis-cli. Everything listens on loopback only.
source "$(dirname "$0")/common.sh"
cargo build --profile dist -q -p weir --example rls_load
load=./target/dist/examples/rls_load

start_redis
write_envoy_bench_configs

# Starts weir with the configuration $1 on free ports; sets weir_pid, url and grpc.
# With $2 = pool, gRPC runs on the main runtime's pool (WEIR_GRPC_POOL) rather than on
# a thread per core.
serve_envoy() {
  rm -f "$dir/out"
  if [ "${2:-}" = pool ]; then export WEIR_GRPC_POOL=1; else unset WEIR_GRPC_POOL; fi
  ./target/dist/weir serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 \
    --config "$1" > "$dir/out" 2>/dev/null &
  weir_pid=$!
  pids+=("$weir_pid")
  until grep -q "weir grpc listening" "$dir/out" 2>/dev/null; do sleep 0.05; done
  url=$(sed -n 's/^weir listening on //p' "$dir/out")
  grpc=$(sed -n 's/^weir grpc listening on //p' "$dir/out")
}

# CPU seconds (user + system) a process has used.
cpu() { awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$1/stat"; }
per_call() { python3 -c "print(f'{($2 - $1) / $3 * 1e6:.1f}')"; }

for variant in memory memory/pool redis redis_counters; do
  store=${variant%/*}
  serve_envoy "$dir/$store.yaml" "${variant#*/}"
  store=$variant
  for n in 1 3; do
    redis-cli -p "$redis_port" flushall >/dev/null
    w0=$(cpu "$weir_pid"); r0=$(cpu "$redis_pid")
    line=$("$load" "$grpc" "$secs" "$n" 64)
    w1=$(cpu "$weir_pid"); r1=$(cpu "$redis_pid")
    calls=$(echo "$line" | sed -n 's/^calls \([0-9]*\) .*/\1/p')
    echo "== $store, ShouldRateLimit, $n descriptor(s): $line"
    echo "   weir CPU per call: $(per_call "$w0" "$w1" "$calls") us"
    [ "${store%/*}" = memory ] || echo "   Redis CPU per descriptor: $(per_call "$r0" "$r1" $((calls * n))) us"
  done
  redis-cli -p "$redis_port" flushall >/dev/null
  w0=$(cpu "$weir_pid"); r0=$(cpu "$redis_pid")
  out=$(wrk -t2 -c64 -d"${secs}s" --latency -s bench/check.lua "$url")
  w1=$(cpu "$weir_pid"); r1=$(cpu "$redis_pid")
  requests=$(echo "$out" | sed -n 's/^ *\([0-9]*\) requests in.*/\1/p')
  echo "== $store, POST /v1/check (wrk): $(echo "$out" | grep -E 'Requests/sec' | tr -s ' ')," \
    "p50 $(echo "$out" | awk '$1=="50%"{print $2}'), p90 $(echo "$out" | awk '$1=="90%"{print $2}')," \
    "p99 $(echo "$out" | awk '$1=="99%"{print $2}'), non-2xx: $(echo "$out" | grep -c Non-2xx)"
  echo "   weir CPU per request: $(per_call "$w0" "$w1" "$requests") us"
  [ "${store%/*}" = memory ] || echo "   Redis CPU per check: $(per_call "$r0" "$r1" "$requests") us"
  pace=${PACE_MS:-5}
  for connections in 4 64; do
    w0=$(cpu "$weir_pid")
    line=$("$load" "$grpc" "$secs" 1 64 "$pace" "$connections")
    w1=$(cpu "$weir_pid")
    calls=$(echo "$line" | sed -n 's/^calls \([0-9]*\) .*/\1/p')
    echo "== $store, paced ($pace ms), ShouldRateLimit, 1 descriptor, $connections connections: $line"
    echo "   weir CPU per call: $(per_call "$w0" "$w1" "$calls") us"
  done
  w0=$(cpu "$weir_pid")
  out=$(WRK_DELAY_MS=$pace wrk -t2 -c64 -d"${secs}s" --latency -s bench/check.lua "$url")
  w1=$(cpu "$weir_pid")
  requests=$(echo "$out" | sed -n 's/^ *\([0-9]*\) requests in.*/\1/p')
  echo "== $store, paced ($pace ms), POST /v1/check (wrk): $(echo "$out" | grep -E 'Requests/sec' | tr -s ' ')," \
    "p50 $(echo "$out" | awk '$1=="50%"{print $2}'), p99 $(echo "$out" | awk '$1=="99%"{print $2}')"
  echo "   weir CPU per request: $(per_call "$w0" "$w1" "$requests") us"
  kill "$weir_pid"
done

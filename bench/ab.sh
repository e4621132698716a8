#!/usr/bin/env bash
# Two weir binaries side by side, to measure one change on a noisy machine:
#   [AB_DOOR=gateway|api] bench/ab.sh OLD_BINARY NEW_BINARY [seconds] [rounds]
# gateway (the default): both proxy to one upstream (nginx answering "ok" itself), with
# the same configuration as bench/gateway.sh. api: both serve the decision API on the
# memory store, and wrk posts /v1/check for 10,000 keys in turn (bench/check.lua).
# Each round runs wrk (2 threads, 64 connections) against both, A first in odd rounds
# and B first in even ones, so that drifts in the machine's load hit both alike. Then,
# paced at the same load (40 connections, 1 ms apart), each binary's CPU time per
# request, from `perf stat -e task-clock` on its process (skipped without perf). Prints
# the median of each side and the ratio B/A. Needs wrk (and nginx for the gateway).
a=$(realpath "${1:-}" 2>/dev/null || true); b=$(realpath "${2:-}" 2>/dev/null || true)
[[ -x "$a" && -x "$b" ]] || { echo "usage: [AB_DOOR=gateway|api] bench/ab.sh OLD_BINARY NEW_BINARY [seconds] [rounds]" >&2; exit 2; }
no_build=1
source "$(dirname "$0")/common.sh"
secs=${3:-5}; rounds=${4:-4}
door=${AB_DOOR:-gateway}
[[ $door == gateway || $door == api ]] || { echo "AB_DOOR is gateway or api" >&2; exit 2; }

if [[ $door == api ]]; then
cat > "$dir/weir.yaml" <<YAML
rules:
  - name: api
    algorithm: gcra
    limit: 1000000000
    period: 1s
YAML
path=/
script=(-s bench/check.lua)
else
start_upstream 2
write_gateway_config
path=/
script=()
fi
serve_weir "$dir/weir.yaml" "$a"; a_pid=$weir_pid; a_url=$url
serve_weir "$dir/weir.yaml" "$b"; b_pid=$weir_pid; b_url=$url

# The median of the numbers on standard input.
# Side $1's URL and pid.
side() { if [[ $1 == A ]]; then target=$a_url; pid=$a_pid; else target=$b_url; pid=$b_pid; fi; }
# The order of the sides in round $1.
order() { if (( $1 % 2 )); then echo A B; else echo B A; fi; }

: > "$dir/rps.A"; : > "$dir/rps.B"
for round in $(seq "$rounds"); do
  for s in $(order "$round"); do
    side "$s"
    rps=$(wrk -t2 -c64 -d"${secs}s" "${script[@]}" "$target$path" | sed -n 's/^Requests\/sec: *//p')
    echo "$rps" >> "$dir/rps.$s"
    echo "round $round $s: $rps requests/s"
  done
done
ma=$(median < "$dir/rps.A"); mb=$(median < "$dir/rps.B")
echo "throughput medians: A $ma, B $mb requests/s; B/A $(python3 -c "print(round($mb / $ma, 3))")"

command -v perf >/dev/null || exit 0
export WRK_DELAY_MS=1
: > "$dir/cpu.A"; : > "$dir/cpu.B"
for round in $(seq "$rounds"); do
  for s in $(order "$round"); do
    side "$s"
    perf stat -e task-clock -p "$pid" -o "$dir/stat" -- sleep "$((secs + 1))" &
    stat=$!
    paced=(-s bench/paced.lua); [[ $door == api ]] && paced=(-s bench/check.lua)
    n=$(wrk -t2 -c40 -d"${secs}s" "${paced[@]}" "$target$path" | awk '/requests in/{print $1}')
    wait "$stat"
    ms=$(awk '/task-clock/{gsub(",","",$1); print $1}' "$dir/stat")
    us=$(python3 -c "print(round($ms * 1000 / $n, 2))")
    echo "$us" >> "$dir/cpu.$s"
    echo "round $round $s: $us µs CPU per request (paced, $n requests)"
  done
done
ca=$(median < "$dir/cpu.A"); cb=$(median < "$dir/cpu.B")
echo "CPU per request medians: A $ca, B $cb µs; B/A $(python3 -c "print(round($cb / $ca, 3))")"

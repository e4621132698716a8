#!/usr/bin/env bash
# Instructions per check in redis-server, under valgrind's callgrind: weir beside a bare
# GCRA script and beside INCRBY + EXPIRE (the workloads of the redis_cpu benchmark),
# counted rather than timed, so the machine's load does not move them.
#
#   bench/redis_instructions.sh
#
# Needs valgrind (callgrind_control, callgrind_annotate) and redis-server on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
server=$(command -v redis-server)
# The testkit starts "$WEIR_REDIS_BIN_DIR/redis-server": here, redis-server under callgrind,
# collecting only between the benchmark's --zero and --dump.
cat > "$dir/redis-server" <<WRAPPER
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file="$dir/cg.%p" "$server" "\$@"
WRAPPER
chmod +x "$dir/redis-server"
ln -s "$(command -v redis-cli)" "$dir/redis-cli"
WEIR_REDIS_BIN_DIR="$dir" WEIR_CALLGRIND_DIR="$dir" \
  cargo bench -p weir-store --bench redis_cpu

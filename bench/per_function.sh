#!/usr/bin/env bash
# A request's instructions by function, inclusive: callgrind_annotate's inclusive counts
# of two runs of one server (N and 2N requests: `AB_PROFILE=DIR bench/instructions.sh`),
# the difference divided by N, so that start-up and shutdown drop out.
#   bench/per_function.sh DIR/A-8000.out DIR/A-16000.out 8000 [rows]
# Each row: instructions per request in the function and what it calls, then the
# function (its crate is the first path segment of the symbol).
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: bench/per_function.sh ONE.out TWO.out N [rows]" >&2; exit 2; }
one=$(mktemp); two=$(mktemp)
trap 'rm -f "$one" "$two"' EXIT
callgrind_annotate --inclusive=yes --threshold=100 "$1" > "$one"
callgrind_annotate --inclusive=yes --threshold=100 "$2" > "$two"
python3 - "$one" "$two" "$3" "${4:-60}" <<'PY'
import re, sys
def counts(path):
    out = {}
    for line in open(path):
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.*)$", line)
        if m and ":" in m.group(2):
            name = m.group(2).split(":", 1)[1].strip()
            name = re.sub(r" \[[^\]]*\]$", "", name)
            out[name] = out.get(name, 0) + int(m.group(1).replace(",", ""))
    return out
one, two, n, rows = counts(sys.argv[1]), counts(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
per = sorted(((two.get(k, 0) - one.get(k, 0)) / n, k) for k in two)
for value, name in reversed(per[-rows:]):
    print(f"{value:10.0f}  {name[:160]}")
PY

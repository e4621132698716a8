#!/usr/bin/env python3
"""Self (exclusive) instructions of a callgrind output file, grouped by crate.

    bench/callgrind_crates.py CALLGRIND_OUT CALLS [TOP]

Prints, per call (the file's instructions divided by CALLS), the instructions spent in
each crate's own functions (the first path segment of the demangled name: the impl's
type for `<T as Trait>::f`, the dropped type for `drop_in_place<T>`), with libc's
memcpy/memmove, the allocator (mimalloc `mi_*`, glibc malloc) and other C functions
apart, then the TOP (default 15) costliest functions. Reads the file itself rather
than callgrind_annotate's listing so that each function's self cost is summed exactly.
"""
import re
import sys
from collections import Counter

path, calls = sys.argv[1], int(sys.argv[2])
top = int(sys.argv[3]) if len(sys.argv) > 3 else 15
names, selfcost = {}, Counter()
fn, skip = None, False


def name(value):
    m = re.match(r"\((\d+)\)(?: (.*))?", value)
    if not m:
        return value
    if m.group(2) is not None:
        names[m.group(1)] = m.group(2)
    return names[m.group(1)]


for line in open(path, errors="replace"):
    line = line.rstrip("\n")
    if not line:
        continue
    if line.startswith("fn="):
        fn = name(line[3:])
        continue
    if line.startswith(("cfn=", "cfi=", "cfl=")):
        name(line.split("=", 1)[1]) if line.startswith("cfn=") else None
        continue
    if line.startswith("calls="):
        skip = True  # the next cost line is the call's inclusive cost
        continue
    if line[0] in "0123456789+-*":
        if skip:
            skip = False
            continue
        parts = line.split()
        if len(parts) >= 2 and fn is not None:
            selfcost[fn] += int(parts[1])
        continue


def crate(function):
    f = function
    if "memcpy" in f or "memmove" in f or "memset" in f:
        return "libc memcpy/memmove/memset"
    if f.startswith(("mi_", "_mi_")) or "mimalloc" in f:
        return "mimalloc"
    if f in ("malloc", "free", "realloc", "calloc", "_int_malloc", "_int_free", "cfree") or f.startswith(("_int_", "malloc_", "tcache")):
        return "glibc malloc"
    m = re.match(r"core::ptr::drop_in_place<(.*)>$", f)
    if m:
        f = m.group(1)
    f = f.lstrip("<&*[").removeprefix("mut ").removeprefix("dyn ").lstrip("<&*[")
    if "::" not in f:
        return "C / other: " + f.split("(")[0][:40]
    return f.split("::")[0].split("<")[0]


by_crate = Counter()
for f, c in selfcost.items():
    by_crate[crate(f)] += c
total = sum(selfcost.values())
print(f"{total / calls:,.0f} instructions per call ({total:,} over {calls:,} calls)")
for c, n in by_crate.most_common():
    if n / calls >= 50:
        print(f"  {n / calls:8,.0f}  {c}")
print(f"costliest functions (self, per call):")
for f, n in selfcost.most_common(top):
    print(f"  {n / calls:8,.0f}  {f[:150]}")

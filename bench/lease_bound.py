#!/usr/bin/env python3
"""The fewest store calls token leases can leave a leased rule with, computed (issue 41).

A gateway saves a store call only for a request that finds units it leased before and
may still spend: a lease's units are spent within three quarters of its hold (1.5 s of
`lease: auto`'s 2 s). Requests of a key asked `lam` times a second at one gateway
(Poisson) then need at least `lam / (1 + spend * lam)` takes a second there, however
large the batches: each take serves its own request and at most the `spend * lam`
expected in its spending time.

Keys: `identities` of a Zipf(`zipf`) popularity sharing `rate` requests a second, each
key's requests in its home region, spread evenly over `gateways` there (the seed's load
balancer routes at random: 20; routing by key: 1).

With `--decisions`, also what `lease: auto` itself reaches with the 2 s hold and random
routing: one gateway's requests of a key simulated (Poisson, seeded), counting takes
and give-backs (a lease with units left at its deadline costs a call to give them
back), for `auto`'s rule before issue 41's last step (lease when the busiest of the
last two seconds asked at least 4; always give back), its rule now (lease when the
units expected in the spending time at the last two seconds' rate are at least 2; a
lease spent to its last unit is not given back), and a gateway told its exact rate
by the store, taking the batch best for it: what knowing the key's demand across the
fleet could add to a gateway's own count. Limits are left out: every request is
taken as allowed (keys over their limit are denied, and remembered denials save
their calls with or without leases).

    bench/lease_bound.py [--identities 219500] [--zipf 0.9] [--rate 14000] [--decisions]

prints, for each hold and routing, the calls without leases over the fewest with them.
"""
import argparse
import bisect
import random

SPEND = 1.5  # seconds a lease of `auto` may be spent: three quarters of its 2 s hold
GATEWAYS = 20


def rates(args):
    weights = [k ** -args.zipf for k in range(1, args.identities + 1)]
    total = sum(weights)
    return [args.rate * w / total for w in weights]


def bound(args, rs):
    slow = sum(r for r in rs if r < 1) / args.rate
    slower = sum(r for r in rs if r < 0.1) / args.rate
    print(f"requests of keys asked less than once a second: {slow:.0%}; less than once in 10 s: {slower:.0%}")
    print("| hold | 20 gateways a key (random routing) | 1 gateway a key (routing by key) |")
    print("| ---: | ---: | ---: |")
    for hold in (2, 10, 60, 300):
        spend = 0.75 * hold
        row = []
        for gateways in (GATEWAYS, 1):
            takes = sum(r / (1 + spend * r / gateways) for r in rs)
            row.append(f"{args.rate / takes:.2f}x")
        print(f"| {hold:g} s | {row[0]} | {row[1]} |")


def requests_per_call(lam, batch_of, give_back_spent, seconds=2000.0, seed=1):
    """Requests over store calls at one gateway asked `lam` a second: `batch_of(this,
    last)` is the batch a take asks for from the units asked in this second and the
    one before (under 2: a plain check)."""
    rnd = random.Random(seed)
    t, calls, requests = 0.0, 0, 0
    counts = {}
    units, deadline, held = 0, 0.0, False
    while t < seconds:
        t += rnd.expovariate(lam)
        requests += 1
        if held and t >= deadline:
            if units > 0 or give_back_spent:
                calls += 1
            held, units = False, 0
        second = int(t)
        counts[second] = counts.get(second, 0) + 1
        if held and units > 0:
            units -= 1
            continue
        calls += 1
        batch = batch_of(counts[second], counts.get(second - 1, 0))
        if batch >= 2:
            held, units, deadline = True, batch - 1, t + SPEND
    return requests / calls


LAMS = [0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.3, 1.5, 2, 2.5, 3, 4, 5, 7, 10, 20, 40]


def population_saving(rs, table):
    """Calls without leases over calls with them, over the population, each key's
    gateway rate looked up (linearly) in `table` (one figure per LAMS)."""
    def at(lam):
        if lam <= LAMS[0]:
            return table[0]
        if lam >= LAMS[-1]:
            return table[-1]
        i = bisect.bisect(LAMS, lam)
        a, b = LAMS[i - 1], LAMS[i]
        return table[i - 1] + (table[i] - table[i - 1]) * (lam - a) / (b - a)
    return sum(rs) / sum(r / at(r / GATEWAYS) for r in rs)


def decisions(rs):
    before = [requests_per_call(l, lambda this, last: (lambda b: b if b >= 4 else 0)(max(this, last)), True) for l in LAMS]
    now = [requests_per_call(l, lambda this, last: (this + last) * 3 // 4, False) for l in LAMS]
    told = [max(requests_per_call(l, lambda this, last, b=b: b, False) for b in range(1, 2 + int(SPEND * l * 1.5) + 2)) for l in LAMS]
    print()
    print("requests per store call at one gateway, by the key's rate there (a second):")
    print("| rate at the gateway | " + " | ".join(f"{l:g}" for l in LAMS) + " |")
    print("| --- |" + " ---: |" * len(LAMS))
    for name, table in (("auto before", before), ("auto now", now), ("told its rate", told)):
        print(f"| {name} | " + " | ".join(f"{v:.2f}" for v in table) + " |")
    print()
    print("| the pro population, 20 gateways, 2 s hold | calls without leases over calls with them |")
    print("| --- | ---: |")
    for name, table in (("auto before", before), ("auto now", now), ("told its rate", told)):
        print(f"| {name} | {population_saving(rs, table):.3f}x |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--identities", type=int, default=219_500)
    p.add_argument("--zipf", type=float, default=0.9)
    p.add_argument("--rate", type=float, default=14_000.0, help="requests a second of the rule")
    p.add_argument("--decisions", action="store_true", help="also simulate auto's decisions")
    args = p.parse_args()
    rs = rates(args)
    bound(args, rs)
    if args.decisions:
        decisions(rs)


if __name__ == "__main__":
    main()

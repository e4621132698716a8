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

    bench/lease_bound.py [--identities 219500] [--zipf 0.9] [--rate 14000]

prints, for each hold and routing, the calls without leases over the fewest with them.
"""
import argparse

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--identities", type=int, default=219_500)
    p.add_argument("--zipf", type=float, default=0.9)
    p.add_argument("--rate", type=float, default=14_000.0, help="requests a second of the rule")
    args = p.parse_args()
    weights = [k ** -args.zipf for k in range(1, args.identities + 1)]
    total = sum(weights)
    rates = [args.rate * w / total for w in weights]
    slow = sum(r for r in rates if r < 1) / args.rate
    slower = sum(r for r in rates if r < 0.1) / args.rate
    print(f"requests of keys asked less than once a second: {slow:.0%}; less than once in 10 s: {slower:.0%}")
    print("| hold | 20 gateways a key (random routing) | 1 gateway a key (routing by key) |")
    print("| ---: | ---: | ---: |")
    for hold in (2, 10, 60, 300):
        spend = 0.75 * hold
        row = []
        for gateways in (20, 1):
            takes = sum(r / (1 + spend * r / gateways) for r in rates)
            row.append(f"{args.rate / takes:.2f}x")
        print(f"| {hold:g} s | {row[0]} | {row[1]} |")

if __name__ == "__main__":
    main()

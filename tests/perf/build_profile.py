#!/usr/bin/env python3
"""Where a Bazel build's time went, from its --profile JSON (gzipped or not).

  ./bazelw build --profile=/tmp/build.profile.gz //examples:train_fashion_mnist
  tests/perf/build_profile.py /tmp/build.profile.gz [--top 20]

Prints the slowest actions (wall seconds, what they built), the sum of
action time per kind (compile, link, ...) and per package, and the
build's wall time: the numbers issue 35 asks for before any build change.
On a shared machine the seconds stretch with the load; the ranking holds.
"""
import argparse
import collections
import gzip
import json


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    events = load(args.profile)
    actions = [e for e in events
               if e.get("ph") == "X" and e.get("cat") == "action processing"]
    if not actions:
        raise SystemExit("no 'action processing' events in " + args.profile)
    begin = min(e["ts"] for e in actions)
    end = max(e["ts"] + e["dur"] for e in actions)
    total = sum(e["dur"] for e in actions) / 1e6
    print(f"{len(actions)} actions, {total:.0f} s of action time, "
          f"{(end - begin) / 1e6:.0f} s from the first to the last")
    print(f"\nslowest {args.top}:")
    for e in sorted(actions, key=lambda e: -e["dur"])[:args.top]:
        print(f"  {e['dur'] / 1e6:7.1f} s  {e['name']}")
    kinds = collections.Counter()
    packages = collections.Counter()
    for e in actions:
        name = e["name"]
        kind = name.split(" ")[0]
        kinds[kind] += e["dur"] / 1e6
        target = name.split(" ")[-1]
        pkg = target.split("/_objs/")[0] if "/_objs/" in target else target
        pkg = pkg.replace("bazel-out/k8-opt/bin/", "").rsplit("/", 1)[0]
        packages[pkg] += e["dur"] / 1e6
    print("\nby kind:")
    for k, s in kinds.most_common():
        print(f"  {s:7.0f} s  {k}")
    print("\nby package:")
    for k, s in packages.most_common(15):
        print(f"  {s:7.0f} s  {k}")


if __name__ == "__main__":
    main()

"""Summarises py-spy's raw (collapsed) stacks: the share of samples under each named frame
(inclusive) and the hottest leaf frames.

    python3 scripts/h200/stacks.py webgpu.txt [--match generate] [--top 40] [--frames A,B,...]
"""
import argparse
import collections
import re


def load(path, match):
    stacks = []
    for line in open(path):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or (match and match not in stack):
            continue
        stacks.append(([re.sub(r" \(.*?\)$", "", f) for f in stack.split(";")], int(count)))
    return stacks


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--match", default="generate", help="only samples whose stack has this text")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--frames", default="", help="comma-separated frame substrings to total")
    args = parser.parse_args()
    stacks = load(args.path, args.match)
    total = sum(c for _, c in stacks) or 1
    print(f"{args.path}: {total} samples with '{args.match}'")
    inclusive = collections.Counter()
    leaves = collections.Counter()
    for frames, count in stacks:
        for f in set(frames):
            inclusive[f] += count
        leaves[frames[-1]] += count
    if args.frames:
        for name in args.frames.split(","):
            n = sum(c for frames, c in stacks if any(name in f for f in frames))
            print(f"  {100 * n / total:5.1f}%  under *{name}*")
    print("inclusive:")
    for f, c in inclusive.most_common(args.top):
        print(f"  {100 * c / total:5.1f}%  {f[:150]}")
    print("leaves:")
    for f, c in leaves.most_common(args.top // 2):
        print(f"  {100 * c / total:5.1f}%  {f[:150]}")


if __name__ == "__main__":
    main()

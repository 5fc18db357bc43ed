# churn.py: Python object churn for bench/profile.sh (run with PYTHONMALLOC=malloc, so that
# every object goes through malloc rather than pymalloc's arenas).
#
# Each round builds records (dicts of strings, ints and lists), small objects, strings and
# byte strings, keeps some of them in a working set that grows for a while and then shrinks,
# and drops the rest at once. Deterministic: no hashing of str in sets, no clock, no
# randomness but a fixed linear congruential generator; prints one checksum line.
#
# Usage: python3 churn.py [ROUNDS]   (default 100: ~1.5 s on one core)
import sys


class Node:
    __slots__ = ("key", "value", "children")

    def __init__(self, key, value):
        self.key = key
        self.value = value
        self.children = []


def lcg(state):
    return (state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF


def make_record(i, r):
    name = "user-%d-%x" % (i, r & 0xFFFF)
    return {
        "id": i,
        "name": name,
        "tags": [name[: 1 + (r >> 8) % 8], str(r % 997), "t%d" % (i % 13)],
        "score": (r >> 16) % 10007,
        "blob": bytes((r >> 24) % 200 + 16),
    }


def one_round(rnd, rounds, state, keep):
    checksum = 0
    records = []
    for i in range(4000):
        state = lcg(state)
        records.append(make_record(i + rnd, state >> 11))
    # Grow the working set during the first half of the rounds, shrink it in the second.
    if rnd < rounds // 2:
        keep.extend(records[:: 4 + rnd % 3])
    else:
        del keep[: len(keep) // 4]
    # A tree of small objects, walked then dropped.
    root = Node("root", 0)
    level = [root]
    for depth in range(5):
        nxt = []
        for n in level:
            for k in range(4):
                child = Node("%s/%d" % (n.key, k), n.value * 4 + k)
                n.children.append(child)
                nxt.append(child)
        level = nxt
    stack = [root]
    while stack:
        n = stack.pop()
        checksum = (checksum * 31 + n.value + len(n.key)) & 0xFFFFFFFF
        stack.extend(n.children)
    # Strings: joins, splits, formatting, a dict keyed by them.
    words = [r["name"] for r in records]
    text = " ".join(words)
    index = {}
    for w in text.split(" "):
        index.setdefault(w[:7], []).append(len(w))
    for k in sorted(index):
        checksum = (checksum * 131 + len(k) + sum(index[k])) & 0xFFFFFFFF
    # Lists that grow by appending (realloc) and are sorted and sliced.
    scores = [r["score"] for r in records]
    scores.sort()
    checksum = (checksum + sum(scores[::97]) + len(keep)) & 0xFFFFFFFF
    return checksum, state


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    keep = []
    state = 42
    total = 0
    for rnd in range(rounds):
        c, state = one_round(rnd, rounds, state, keep)
        total = (total * 1000003 + c) & 0xFFFFFFFFFFFFFFFF
    kept = sum(len(r["blob"]) for r in keep)
    print("churn.py rounds=%d kept=%d kept_bytes=%d checksum=%016x" % (rounds, len(keep), kept, total))


main()

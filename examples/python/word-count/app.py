"""Word count in Python: the words of every line (split at ASCII whitespace), counted
where the tasks run and merged into `examples/word-count`'s result: the total, the
distinct words and the ten most frequent (ties in word order)."""

import heapq  # noqa: F401: Counter.most_common imports it as it runs, too late for the build
import re
from collections import Counter

import flint_guest

# Rust's ASCII whitespace: bytes.split() would also split at a vertical tab (\x0b).
WHITESPACE = re.compile(rb"[ \t\n\x0c\r]+")
TOP = 10


class WordCount(flint_guest.Combine):
    def empty(self):
        return Counter()

    def add(self, counts, partition):
        for batch in partition.batches():
            if b"\x0b" in batch:
                counts.update(w for w in WHITESPACE.split(batch) if w)
            else:
                counts.update(batch.split())
        return counts

    def run(self, partition):
        return self.add(Counter(), partition)

    def merge(self, a, b):
        if len(a) < len(b):
            a, b = b, a
        a.update(b)
        return a

    def finish(self, counts):
        # Words are counted as bytes; those that are not UTF-8 under their lossy form.
        # When every word is UTF-8 (one check over all of them), the table is already
        # keyed by text, and the bytes of UTF-8 sort as its text does.
        try:
            b"\n".join(counts).decode()
        except UnicodeDecodeError:
            lossy = Counter()
            for word, n in counts.items():
                lossy[word.decode("utf-8", "replace").encode()] += n
            counts = lossy
        return {
            "total_words": sum(counts.values()),
            "distinct_words": len(counts),
            "top": [[w.decode(), n] for w, n in top(counts, TOP)],
        }


def top(counts, k):
    """The ``k`` most frequent, ties in word order, without sorting every word."""
    most = counts.most_common(k)
    if len(most) == k:
        floor = most[-1][1]
        most = [wn for wn in counts.items() if wn[1] >= floor]
    return sorted(most, key=lambda wn: (-wn[1], wn[0]))[:k]

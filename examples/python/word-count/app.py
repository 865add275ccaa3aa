"""Word count in Python: the words of every line (split at ASCII whitespace), counted
where the tasks run and merged into `examples/word-count`'s result: the total, the
distinct words and the ten most frequent (ties in word order)."""

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
        words = Counter()
        for word, n in counts.items():
            words[word.decode("utf-8", "replace")] += n
        top = sorted(words.items(), key=lambda wn: (-wn[1], wn[0]))[:TOP]
        return {
            "total_words": sum(words.values()),
            "distinct_words": len(words),
            "top": [[w, n] for w, n in top],
        }

"""Word count through a shuffle, in Python: each map task counts its split's words
(split at ASCII whitespace), the counts move by word to the reduce tasks, which sum
them (and write `word<TAB>count` lines with `--output DIR`); the result is
`examples/word-count`'s: the total, the distinct words and the ten most frequent (ties
in word order)."""

import re
from collections import Counter

import flint_guest

# Rust's ASCII whitespace: bytes.split() would also split at a vertical tab (\x0b).
WHITESPACE = re.compile(rb"[ \t\n\x0c\r]+")
TOP = 10


def ranked(words):
    return sorted(words, key=lambda wn: (-wn[1], wn[0]))[:TOP]


class WordCount(flint_guest.MapReduce):
    def map(self, partition, out):
        counts = Counter()
        for batch in partition.batches():
            if b"\x0b" in batch:
                counts.update(w for w in WHITESPACE.split(batch) if w)
            else:
                counts.update(batch.split())
        for word, n in counts.items():
            # Words that are not UTF-8 count under their lossy form, as in Rust.
            out.emit(word if word.isascii() else word.decode("utf-8", "replace").encode(), n)

    def combine(self, a, b):
        return a + b

    def empty(self):
        return {"total_words": 0, "distinct_words": 0, "top": []}

    def reduce(self, word, counts, out):
        n = sum(counts)
        word = word.decode()
        if flint_guest.part.wanted():
            flint_guest.part.line(f"{word}\t{n}")
        out["total_words"] += n
        out["distinct_words"] += 1
        out["top"].append((word, n))
        if len(out["top"]) >= 4 * TOP:
            out["top"] = ranked(out["top"])
        return out

    def merge(self, a, b):
        a["total_words"] += b["total_words"]
        a["distinct_words"] += b["distinct_words"]
        a["top"] = ranked(a["top"] + b["top"])
        return a

    def finish(self, total):
        total["top"] = [[w, n] for w, n in ranked(total["top"])]
        return total

"""{{description}}"""

from collections import Counter

import flint_guest


class Job(flint_guest.MapReduce):
    """Words split at whitespace, counted in each map task, moved by word to the reduce
    tasks and summed there; the result has `examples/word-count`'s shape: the total, the
    distinct words and the most frequent (`top` of them, from the configuration; ties in
    word order). With `--output DIR`, each reduce task writes `word<TAB>count` lines."""

    def map(self, partition, out):
        counts = Counter()
        for batch in partition.batches():  # whole lines, about 1 MiB at a time
            counts.update(batch.split())
        for word, n in counts.items():
            # Words that are not UTF-8 under their lossy form, so that they meet.
            out.emit(word if word.isascii() else word.decode("utf-8", "replace").encode(), n)

    def combine(self, a, b):  # reduceByKey: counts folded before they move
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
        if len(out["top"]) >= 4 * self.top():
            out["top"] = self.ranked(out["top"])
        return out

    def merge(self, a, b):
        a["total_words"] += b["total_words"]
        a["distinct_words"] += b["distinct_words"]
        a["top"] = self.ranked(a["top"] + b["top"])
        return a

    def finish(self, total):
        total["top"] = [[w, n] for w, n in self.ranked(total["top"])]
        return total

    def top(self):
        return int(flint_guest.config("top", "10"))

    def ranked(self, words):
        return sorted(words, key=lambda wn: (-wn[1], wn[0]))[: self.top()]

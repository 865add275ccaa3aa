"""{{description}}"""

from collections import Counter

import flint_guest


class Job(flint_guest.Combine):
    """Words split at whitespace, counted into one table a slot where the tasks run;
    the result has `examples/word-count`'s shape: the total, the distinct words and the
    most frequent (`top` of them, from the configuration; ties in word order)."""

    def empty(self):
        return Counter()

    def add(self, counts, partition):
        for batch in partition.batches():  # whole lines, about 1 MiB at a time
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
        top = int(flint_guest.config("top", "10"))
        words = Counter()
        for word, n in counts.items():
            words[word.decode("utf-8", "replace")] += n
        ranked = sorted(words.items(), key=lambda wn: (-wn[1], wn[0]))[:top]
        return {
            "total_words": sum(words.values()),
            "distinct_words": len(words),
            "top": [[w, n] for w, n in ranked],
        }

"""{{description}}"""

import flint_guest


class Job(flint_guest.Aggregate):
    """Each task counts its split's lines; the counts are merged into the total."""

    def run(self, partition):
        lines = 0
        for batch in partition.batches():  # whole lines, about 1 MiB at a time
            lines += batch.count(b"\n")
            if not batch.endswith(b"\n"):
                lines += 1  # the input's last line, without its newline
        return lines

    def merge(self, a, b):
        return a + b

    def finish(self, total):
        return {"lines": total}

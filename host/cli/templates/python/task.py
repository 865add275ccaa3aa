"""{{description}}"""

import flint_guest


class Job(flint_guest.Task):
    """Each task's output is its split's line count; the job's result lists them in
    split order."""

    def run(self, partition):
        lines = 0
        for batch in partition.batches():  # whole lines, about 1 MiB at a time
            lines += batch.count(b"\n")
            if not batch.endswith(b"\n"):
                lines += 1  # the input's last line, without its newline
        return lines

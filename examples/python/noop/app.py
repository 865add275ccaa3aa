"""A Python job whose tasks do nothing: what a task costs the platform (`make bench`)."""

import flint_guest


class Noop(flint_guest.Combine):
    def run(self, partition):
        return 1

    def empty(self):
        return 0

    def add(self, acc, partition):
        return acc + 1

    def merge(self, a, b):
        return a + b

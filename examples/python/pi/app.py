"""Monte Carlo pi in Python, as `examples/pi`: task t of T seeds SplitMix64 with t,
draws `points` pairs (x, y the top 32 bits of two successive outputs) and counts
x² + y² < 2⁶⁴, so both count exactly the same points."""

import flint_guest

MASK = (1 << 64) - 1


def count_inside(seed, points):
    state = seed
    inside = 0
    for _ in range(points):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        x = (z ^ (z >> 31)) >> 32
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        y = (z ^ (z >> 31)) >> 32
        if x * x + y * y < 1 << 64:
            inside += 1
    return inside


class Pi(flint_guest.Combine):
    def run(self, partition):
        points = int(flint_guest.config("points", "1000000"))
        inside = count_inside(flint_guest.task_info().task_index, points)
        return (inside, points)

    def empty(self):
        return (0, 0)

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def finish(self, c):
        inside, total = c
        return {"inside": inside, "total": total, "pi": 4.0 * inside / total if total else 0.0}

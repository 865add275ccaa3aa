"""The job's hooks, natively: `python3 -m unittest` in this folder."""

import unittest

from flint_guest.testing import Local

from app import Job


class TestJob(unittest.TestCase):
    def test_counts_words_across_splits_and_partitions(self):
        result = Local(config={"top": 2}).map_reduce(Job, ["a b a\n", "b c\tb\n"], partitions=3)
        self.assertEqual(result, {"total_words": 6, "distinct_words": 3, "top": [["b", 3], ["a", 2]]})

    def test_writes_a_line_a_word_in_its_partition(self):
        local = Local()
        local.map_reduce(Job, ["a b a\n", "b c\tb\n"], partitions=2, parts=True)
        lines = sorted(line for part in local.parts for line in part.decode().splitlines())
        self.assertEqual(lines, ["a\t2", "b\t3", "c\t1"])


if __name__ == "__main__":
    unittest.main()

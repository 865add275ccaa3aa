"""The job's hooks, natively: `python3 -m unittest` in this folder."""

import unittest

from flint_guest.testing import Local

from app import Job


class TestJob(unittest.TestCase):
    def test_counts_words_across_splits(self):
        result = Local(config={"top": 2}).run(Job, ["a b a\n", "b c\tb\n"])
        self.assertEqual(result, {"total_words": 6, "distinct_words": 3, "top": [["b", 3], ["a", 2]]})


if __name__ == "__main__":
    unittest.main()

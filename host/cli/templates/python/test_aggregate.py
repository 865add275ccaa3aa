"""The job's hooks, natively: `python3 -m unittest` in this folder."""

import unittest

from flint_guest.testing import Local

from app import Job


class TestJob(unittest.TestCase):
    def test_counts_every_split_s_lines(self):
        self.assertEqual(Local().run(Job, ["a\nb\n", "c\n", "d"]), {"lines": 4})


if __name__ == "__main__":
    unittest.main()

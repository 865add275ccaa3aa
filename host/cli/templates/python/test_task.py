"""The job's hooks, natively: `python3 -m unittest` in this folder."""

import unittest

from flint_guest.testing import Local

from app import Job


class TestJob(unittest.TestCase):
    def test_lists_each_split_s_lines(self):
        self.assertEqual(Local().run(Job, ["a\nb\n", "c", ""]), [2, 1, 0])


if __name__ == "__main__":
    unittest.main()

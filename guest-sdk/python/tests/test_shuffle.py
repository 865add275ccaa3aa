"""The Python SDK's shuffle, natively: `python3 -m unittest discover -s tests` in
guest-sdk/python (run by tests/python.rs)."""

import random
import unittest

from flint_guest import Fatal, MapReduce, part, task_info
from flint_guest._shuffle import HEADER, combine_sorted, decode_key, encode_key
from flint_guest import Task
from flint_guest.testing import File, Local


def shuffled(rng, items):
    items = list(items)
    rng.shuffle(items)
    return items


class Keys(unittest.TestCase):
    def assert_ordered_as_python(self, keys):
        by_bytes = sorted(keys, key=encode_key)
        self.assertEqual(by_bytes, sorted(keys))
        for key in keys:
            self.assertEqual(decode_key(encode_key(key)), key)
            self.assertIs(type(decode_key(encode_key(key))), type(key))

    def test_ints_sort_and_round_trip(self):
        rng = random.Random(1)
        edges = [0, 1, -1, 255, 256, -255, -256, 2**63, -(2**63), 2**64 - 1, 10**600, -(10**600)]
        keys = edges + [rng.randrange(-(2**70), 2**70) >> rng.randrange(70) for _ in range(2000)]
        self.assert_ordered_as_python(shuffled(rng, keys))

    def test_floats_sort_and_round_trip(self):
        rng = random.Random(2)
        edges = [0.0, 1.0, -1.0, float("inf"), float("-inf"), 5e-324, -5e-324, 1.7976931348623157e308]
        keys = edges + [rng.uniform(-1e9, 1e9) * rng.choice([1, 1e-300, 1e300]) for _ in range(2000)]
        self.assert_ordered_as_python(shuffled(rng, keys))
        self.assertEqual(encode_key(-0.0), encode_key(0.0), "equal keys encode alike")

    def test_strings_and_bytes_sort_and_round_trip(self):
        rng = random.Random(3)
        alphabet = ["", "\x00", "a", "ab", "é", "\uffff", "\U0001f600", "\x00\x00", "z"]
        strings = list({"".join(rng.choice(alphabet) for _ in range(rng.randrange(5))) for _ in range(500)})
        self.assert_ordered_as_python(shuffled(rng, strings))
        self.assert_ordered_as_python(shuffled(rng, [s.encode() for s in strings] + [b"\xff", b"\x00\xff"]))

    def test_tuples_sort_as_python_sorts_them(self):
        rng = random.Random(4)
        parts = [0, -3, 7, 2**70, "", "a", "a\x00", "ab", b"", b"\x00", b"\xff"]
        def tuple_of(depth):
            items = []
            for _ in range(rng.randrange(4)):
                kind = rng.randrange(3)
                items.append(tuple_of(depth + 1) if kind == 0 and depth < 2 else rng.choice(parts))
            return tuple(items)
        # Python compares tuples element by element, and only elements of one type
        # compare: keep each position to one type.
        ints = list({(rng.choice(parts[:4]), rng.choice(parts[4:8])) for _ in range(300)})
        self.assert_ordered_as_python(shuffled(rng, ints + [(0,), (0, "")]))
        nested = [tuple_of(0) for _ in range(300)]
        for key in nested:
            self.assertEqual(decode_key(encode_key(key)), key)

    def test_types_in_a_fixed_order(self):
        keys = [(), "a", b"a", 2.5, 3, None]
        self.assertEqual(sorted(keys, key=encode_key), [None, 3, 2.5, b"a", "a", ()])
        self.assertEqual(encode_key(True), encode_key(1), "True == 1, so they are one key")

    def test_other_keys_are_refused_with_what_a_key_can_be(self):
        for key in ([1], {"a": 1}, object(), ("ok", [1])):
            with self.assertRaises(Fatal) as said:
                encode_key(key)
            self.assertIn("a key must be str, bytes, int, float, None or a tuple of them", str(said.exception))
        with self.assertRaises(Fatal):
            encode_key(1 << 3000)

    def test_a_cut_key_is_refused(self):
        for data in (b"", b"\x11\x05\x01", b"\x40\x11\x01\x01", b"\x99"):
            with self.assertRaises(Fatal):
                decode_key(data)


class Sum(MapReduce):
    def map(self, partition, out):
        for line in partition.lines():
            for word in line.split():
                out.emit(word, 1)

    def combine(self, a, b):
        return a + b

    def empty(self):
        return []

    def reduce(self, key, values, out):
        values = list(values)
        part.line(f"{key} {values}")
        out.append((key, values))
        return out

    def merge(self, a, b):
        return a + b


class Grouped(Sum):
    combine = MapReduce.combine

    def map(self, partition, out):
        task = task_info().task_index
        for i, word in enumerate(partition.read().split()):
            out.emit(word.decode(), (task, i))

    def partition(self, key, partitions):
        return 0 if key < "m" else partitions - 1


class Jobs(unittest.TestCase):
    def test_a_combining_job_folds_each_map_s_values_of_a_key(self):
        local = Local()
        result = local.map_reduce(Sum, ["b a b\n", "a c\n"], partitions=2, parts=True)
        self.assertEqual(sorted(result), [["a", [1, 1]], ["b", [2]], ["c", [1]]])
        self.assertEqual(sorted(b"".join(local.parts).decode().splitlines()), ["a [1, 1]", "b [2]", "c [1]"])

    def test_a_grouping_job_sees_every_value_in_map_order_and_its_own_partitions(self):
        result = Local().map_reduce(Grouped, ["b a b\n", "z a\n"], partitions=3)
        self.assertEqual(result, [["a", [[0, 1], [1, 1]]], ["b", [[0, 0], [0, 2]]], ["z", [[1, 0]]]])

    def test_an_unhashable_key_in_a_combining_job_says_what_a_key_may_be(self):
        class Lists(Sum):
            def map(self, partition, out):
                out.emit(["a"], 1)

        with self.assertRaises(Fatal) as said:
            Local().map_reduce(Lists, ["a\n"], partitions=2)
        self.assertIn("a key must be str, bytes, int, float, None or a tuple of them", str(said.exception))

    def test_a_partition_out_of_range_fails_the_map(self):
        class Wrong(Grouped):
            def partition(self, key, partitions):
                return partitions

        with self.assertRaises(Fatal) as said:
            Local().map_reduce(Wrong, ["a\n"], partitions=2)
        self.assertIn("partition() gave 2 for a job of 2 reduce partitions", str(said.exception))

    def test_combine_sorted_folds_runs_and_leaves_lone_records(self):
        import pickle

        def record(p, key, value):
            k, v = encode_key(key), pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            return HEADER.pack(p, len(k), len(v)) + k + v

        batch = record(0, "a", 1) + record(0, "a", 2) + record(0, "b", 5) + record(1, "b", 7) + record(1, "b", 1)
        out = combine_sorted(Sum(), batch)
        self.assertEqual(out, record(0, "a", 3) + record(0, "b", 5) + record(1, "b", 8))
        self.assertIsNone(combine_sorted(Grouped(), batch), "a job that does not combine says so")
        self.assertEqual(combine_sorted(Sum(), b""), b"", "the host's first, empty ask")


if __name__ == "__main__":
    unittest.main()


class Paths(Task):
    def run(self, partition):
        return [partition.path, partition.read().decode()]


class Inputs(unittest.TestCase):
    def test_a_file_input_is_seen_by_its_path_and_plain_text_as_input_txt(self):
        got = Local().run(Paths, [File("tables/orders.tbl", "1|2\n"), "a b\n", File("raw.bin", b"\x00\n")])
        self.assertEqual(got, [["tables/orders.tbl", "1|2\n"], ["input.txt", "a b\n"], ["raw.bin", "\x00\n"]])
        with self.assertRaises(TypeError):
            File("x.txt", 7)

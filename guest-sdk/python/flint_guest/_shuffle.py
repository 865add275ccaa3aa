"""Map/reduce jobs: the ``MapReduce`` class, keys encoded so that their bytes sort as
Python sorts them, records in the ``flint:task/shuffle`` layout, a map's ``Emitter``,
a reduce's values and its part file."""

import itertools
import pickle
import struct
import zlib
from operator import itemgetter
from typing import Any, Callable, Iterator, Optional

from ._api import Aggregate, Fatal, Partition

# The layout's record header: partition, key length, value length (u32 LE each).
HEADER = struct.Struct("<III")
# A batch of records goes to the host once it holds this many bytes.
BATCH = 1 << 20
# A combining table is emitted once it holds this many keys (and at the task's end).
COMBINE_KEYS = 1 << 17
# What one reduce read asks the host for.
READ = 1 << 20
# A part file's bytes go to the host once this many are waiting.
PART_BUFFER = 1 << 20


class MapReduce(Aggregate):
    """A map/reduce job, as Spark's ``map(..).reduceByKey(..)`` or ``groupByKey``:
    ``map(self, partition, out)`` emits ``(key, value)`` records with
    ``out.emit(key, value)``; the host moves them by key to ``--reduce-partitions``
    reduce tasks; ``reduce(self, key, values, out)`` sees each key of its partition
    once, with an iterator over all its values, and returns the task's output with
    the key added (``out`` changed in place, or a new value). Each reduce task starts
    from ``empty(self)``; the outputs fold into the job's result with ``merge`` (in
    partition order) and ``finish``.

    Define ``combine(self, a, b)``, returning the fold of two values of one key, to
    fold a key's values on the map side before they move (``reduceByKey``): it must be
    commutative and associative.

    Keys are ``str``, ``bytes``, ``int`` (``bool`` counts as ``int``), ``float``,
    ``None`` and tuples of them. A reduce sees its keys in order: keys of one type in
    Python's order, and across types ``None``, then numbers (every ``int`` before every
    ``float``), ``bytes``, ``str``, tuples. Values are anything that pickles.

    A key's reduce partition is ``partition(self, key, partitions)``: by default a
    CRC-32 of the key's encoding, the same on every host and in every run; define it
    for a range partition (a total sort, say). It must be below ``partitions``.
    """

    def map(self, partition: Partition, out: "Emitter") -> None:
        raise NotImplementedError(f"{type(self).__name__} must define map(self, partition, out)")

    def combine(self, a: Any, b: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not combine")

    def partition(self, key: Any, partitions: int) -> int:
        return zlib.crc32(encode_key(key)) % partitions

    def empty(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define empty(self)")

    def reduce(self, key: Any, values: Iterator[Any], out: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define reduce(self, key, values, out)")

    def run(self, partition: Partition) -> Any:
        raise Fatal("a map/reduce job runs map and reduce tasks, not run")


def combines(job: MapReduce) -> bool:
    """Whether ``job`` folds a key's values on the map side."""
    return type(job).combine is not MapReduce.combine


# Key encoding. Each value begins with a tag byte that orders the types; a tuple's
# elements are followed by 0x00, and a str or bytes inside a tuple ends with 0x00
# (its own zero bytes sent as 0x00 0xFF), so that a shorter tuple or string sorts first.
_NONE, _NEG, _INT, _FLOAT, _BYTES, _STR, _TUPLE = 0x05, 0x10, 0x11, 0x20, 0x30, 0x31, 0x40
_DOUBLE = struct.Struct(">Q")
_SIGN = 1 << 63
_KEYS = "str, bytes, int, float, None or a tuple of them"
_MISSING = object()


def encode_key(key: Any) -> bytes:
    """``key``'s bytes in the shuffle: equal keys encode alike, and the bytes of keys
    of one type sort as the keys do."""
    kind = type(key)
    if kind is str:
        return b"\x31" + key.encode("utf-8", "surrogatepass")
    if kind is bytes:
        return b"\x30" + key
    out = bytearray()
    _encode_into(out, key, False)
    return bytes(out)


def _encode_into(out: bytearray, key: Any, nested: bool) -> None:
    if isinstance(key, str):
        data = key.encode("utf-8", "surrogatepass")
        out.append(_STR)
        out += data.replace(b"\x00", b"\x00\xff") + b"\x00" if nested else data
    elif isinstance(key, (bytes, bytearray, memoryview)):
        data = bytes(key)
        out.append(_BYTES)
        out += data.replace(b"\x00", b"\x00\xff") + b"\x00" if nested else data
    elif isinstance(key, int):
        n = int(key)
        size = (abs(n).bit_length() + 7) // 8
        if size > 255:
            raise Fatal(f"an int key of {size} bytes is too large to shuffle (at most 255)")
        if n >= 0:
            out += bytes((_INT, size)) + n.to_bytes(size, "big")
        else:
            out += bytes((_NEG, 255 - size)) + ((1 << (8 * size)) - 1 + n).to_bytes(size, "big")
    elif isinstance(key, float):
        # -0.0 == 0.0, so they must encode alike.
        (bits,) = _DOUBLE.unpack(struct.pack(">d", key + 0.0))
        bits = bits ^ 0xFFFF_FFFF_FFFF_FFFF if bits & _SIGN else bits | _SIGN
        out.append(_FLOAT)
        out += _DOUBLE.pack(bits)
    elif key is None:
        out.append(_NONE)
    elif isinstance(key, tuple):
        out.append(_TUPLE)
        for item in key:
            _encode_into(out, item, True)
        out.append(0)
    else:
        raise Fatal(f"a key must be {_KEYS}, not {type(key).__name__} ({key!r:.80})")


def decode_key(data: bytes) -> Any:
    """The key ``encode_key`` made ``data`` from."""
    try:
        tag = data[0]
        if tag == _BYTES:
            return data[1:]
        if tag == _STR:
            return data[1:].decode("utf-8", "surrogatepass")
        key, end = _decode_at(data, 0, False)
    except (IndexError, ValueError, struct.error):
        end = -1
    if end != len(data):
        raise Fatal(f"the host sent a key that does not decode ({data[:40]!r})")
    return key


def _decode_at(data: bytes, at: int, nested: bool):
    tag = data[at]
    at += 1
    if tag in (_STR, _BYTES):
        if nested:
            parts = []
            while True:
                zero = data.index(b"\x00", at)
                parts.append(data[at:zero])
                if data[zero + 1 : zero + 2] == b"\xff":
                    parts.append(b"\x00")
                    at = zero + 2
                else:
                    at = zero + 1
                    break
            raw = b"".join(parts)
        else:
            raw, at = data[at:], len(data)
        return (raw.decode("utf-8", "surrogatepass") if tag == _STR else raw), at
    if tag == _INT:
        size = data[at]
        return int.from_bytes(data[at + 1 : at + 1 + size], "big"), at + 1 + size
    if tag == _NEG:
        size = 255 - data[at]
        n = int.from_bytes(data[at + 1 : at + 1 + size], "big")
        return n - ((1 << (8 * size)) - 1), at + 1 + size
    if tag == _FLOAT:
        (bits,) = _DOUBLE.unpack_from(data, at)
        bits = bits ^ _SIGN if bits & _SIGN else bits ^ 0xFFFF_FFFF_FFFF_FFFF
        return struct.unpack(">d", _DOUBLE.pack(bits))[0], at + 8
    if tag == _NONE:
        return None, at
    if tag == _TUPLE:
        items = []
        while data[at] != 0:
            item, at = _decode_at(data, at, True)
            items.append(item)
        return tuple(items), at + 1
    raise ValueError(f"no key type {tag:#x}")


def _value(value: Any) -> bytes:
    """A value's bytes in the shuffle: pickled (protocol 5)."""
    try:
        return pickle.dumps(value, 5)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise Fatal(f"a value cannot be sent on ({e}): it must pickle") from None


class Emitter:
    """Where a map task's records go (``partitions``: the job's reduce partitions).
    Records leave the task in batches of about a MiB; a job that combines keeps one
    value a key until its table holds 131,072 keys or the task ends."""

    def __init__(self, job: MapReduce, partitions: int, send: Callable[[bytes], None]):
        self.partitions = partitions
        self._job = job
        self._send = send
        self._parts: list = []
        self._size = 0
        self._hashed = type(job).partition is MapReduce.partition
        self._table: Optional[dict] = {} if combines(job) else None
        self._combine = job.combine

    def emit(self, key: Any, value: Any) -> None:
        """Emits one record."""
        table = self._table
        if table is None:
            self._push(key, value)
            return
        try:
            held = table.get(key, _MISSING)
        except TypeError:
            encode_key(key)  # says what a key may be
            raise
        if held is _MISSING:
            table[key] = value
            if len(table) >= COMBINE_KEYS:
                self._drain()
        else:
            table[key] = self._combine(held, value)

    def _push(self, key: Any, value: Any) -> None:
        header, encoded, data = self._record(key, value)
        self._parts += (header, encoded, data)
        self._size += len(header) + len(encoded) + len(data)
        if self._size >= BATCH:
            self._flush()

    def _record(self, key: Any, value: Any) -> tuple:
        """One record's header, key and value, encoded."""
        kind = type(key)
        if kind is bytes:
            encoded = b"\x30" + key
        elif kind is str:
            encoded = b"\x31" + key.encode("utf-8", "surrogatepass")
        else:
            encoded = encode_key(key)
        if self._hashed:
            partition = zlib.crc32(encoded) % self.partitions
        else:
            partition = self._job.partition(key, self.partitions)
            if type(partition) is not int or not 0 <= partition < self.partitions:
                raise Fatal(
                    f"partition() gave {partition!r} for a job of {self.partitions} reduce partitions"
                )
        data = _value(value)
        return HEADER.pack(partition, len(encoded), len(data)), encoded, data

    def _drain(self) -> None:
        table = self._table
        if table:
            self._table = {}
            record = self._record
            for key, value in table.items():
                header, encoded, data = record(key, value)
                self._parts += (header, encoded, data)
                self._size += len(header) + len(encoded) + len(data)
                if self._size >= BATCH:
                    self._flush()

    def _flush(self) -> None:
        if self._parts:
            batch = b"".join(self._parts)
            self._parts, self._size = [], 0
            self._send(batch)

    def _close(self) -> None:
        self._drain()
        self._flush()


def map_task(job: MapReduce, partition: Partition, partitions: int, send: Callable[[bytes], None]) -> None:
    """One map task: ``job.map`` over ``partition``, its records sent in batches."""
    out = Emitter(job, partitions, send)
    job.map(partition, out)
    out._close()


def records(batch: bytes) -> list:
    """A flat batch's records: (partition, key, value), encoded."""
    out = []
    add = out.append
    unpack = HEADER.unpack_from
    at, end = 0, len(batch)
    while at < end:
        if at + 12 > end:
            raise Fatal("the host sent a cut record")
        partition, klen, vlen = unpack(batch, at)
        key_at = at + 12
        value_at = key_at + klen
        at = value_at + vlen
        if at > end:
            raise Fatal("the host sent a cut record")
        add((partition, batch[key_at:value_at], batch[value_at:at]))
    return out


def combine_sorted(job: MapReduce, batch: bytes) -> Optional[bytes]:
    """The host's ``combine-sorted``: ``batch``'s records, sorted by key, with each run
    of one key folded by ``combine`` into one record; ``None`` when the job does not
    combine."""
    if not combines(job):
        return None
    out = []
    for (partition, key), run in itertools.groupby(records(batch), key=itemgetter(0, 1)):
        first = next(run)
        second = next(run, None)
        if second is None:
            out += (HEADER.pack(partition, len(key), len(first[2])), key, first[2])
            continue
        acc = job.combine(pickle.loads(first[2]), pickle.loads(second[2]))
        for record in run:
            acc = job.combine(acc, pickle.loads(record[2]))
        data = _value(acc)
        out += (HEADER.pack(partition, len(key), len(data)), key, data)
    return b"".join(out)


class _Part:
    """A reduce task's part, when the job was given an output directory (``--output
    DIR``) or collects its parts (``--collect``): what ``reduce`` writes here becomes
    ``DIR/part-NNNNN`` once its task succeeds (Spark's ``saveAsTextFile``)."""

    def __init__(self):
        self._write: Optional[Callable[[bytes], None]] = None
        self._buffer: list = []
        self._size = 0

    def wanted(self) -> bool:
        """Whether this task writes a part: worth asking before formatting lines."""
        return self._write is not None

    def write(self, data) -> None:
        """Appends ``data`` (``bytes``, or ``str`` as UTF-8); nothing when no part is
        wanted."""
        if self._write is None:
            return
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        self._buffer.append(bytes(data))
        self._size += len(data)
        if self._size >= PART_BUFFER:
            self._flush()

    def line(self, text) -> None:
        """Appends ``text`` and a newline."""
        self.write(text)
        self.write(b"\n")

    def _flush(self) -> None:
        if self._buffer and self._write is not None:
            data = b"".join(self._buffer)
            self._buffer, self._size = [], 0
            self._write(data)

    def _begin(self, write: Optional[Callable[[bytes], None]]) -> None:
        self._write, self._buffer, self._size = write, [], 0


part = _Part()


def reduce_task(job: MapReduce, read: Callable[[int], bytes], write: Optional[Callable[[bytes], None]]) -> Any:
    """One reduce task: its sorted records read in batches through ``read``, each key
    given to ``job.reduce`` once with its values; its part written through ``write``."""
    part._begin(write)
    try:
        out = job.empty()
        for key, run in itertools.groupby(_sorted_records(read), key=itemgetter(1)):
            out = job.reduce(decode_key(key), (pickle.loads(v) for _, _, v in run), out)
        part._flush()
        return out
    finally:
        part._begin(None)


def _sorted_records(read: Callable[[int], bytes]) -> Iterator[tuple]:
    """A reduce task's records, (partition, key, value) encoded, read in batches as
    they are asked for."""
    while True:
        batch = read(READ)
        if not batch:
            return
        yield from records(batch)

"""Running a job's hooks natively, without a cluster, as the host would: for a job's
own tests (``python3 -m unittest`` in its folder).

    from flint_guest.testing import Local
    from app import WordCount

    def test_counts_words():
        result = Local(config={"top": "2"}).run(WordCount, ["a b a\\n", "b c\\n"])
        assert result["total_words"] == 5

Each input is one task's partition: ``str`` or ``bytes`` is a split's text (read in
batches of whole lines, as the host hands them over) of a file ``input.txt``, a
``File(path, text)`` the same of the file ``path`` (for a job that tells its inputs
apart by path), an ``int`` a generated partition's index, anything else a value
partition (sent as JSON). Outputs and
partial results are pickled and read back between hooks, and the result goes through
JSON, as in a cluster, so a value that cannot travel fails here first.

A ``MapReduce`` job runs with ``map_reduce``: each input is one map task, and its
records move to ``partitions`` reduce tasks, sorted and grouped as the host does it.
"""

import json
import pickle
from typing import Any, Iterable, Optional

from . import _api, _shuffle
from ._api import Aggregate, Combine, Partition, TaskInfo, Token


class File:
    """A split of the file ``path`` holding ``text`` (``str`` or ``bytes``), as a task
    reading that file sees it: ``Partition.path`` is ``path``."""

    def __init__(self, path: str, text):
        if not isinstance(text, (str, bytes)):
            raise TypeError(f"File({path!r}, ...) holds str or bytes, not {type(text).__name__}")
        self.path, self.text = path, text


def _partition(item, batch_bytes):
    path = "input.txt"
    if isinstance(item, File):
        path, item = item.path, item.text
    if isinstance(item, int) and not isinstance(item, bool):
        return Partition(index=item)
    if isinstance(item, (str, bytes)):
        data = item.encode() if isinstance(item, str) else item
        at = 0

        def next_batch(max_bytes):
            nonlocal at
            rest = data[at:]
            max_bytes = min(max_bytes, batch_bytes)
            if len(rest) <= max_bytes:
                cut = len(rest)
            else:
                newline = rest.rfind(b"\n", 0, max_bytes)
                if newline >= 0:
                    cut = newline + 1
                else:
                    newline = rest.find(b"\n")
                    cut = len(rest) if newline < 0 else newline + 1
            at += cut
            return rest[:cut]

        return Partition(path=path, start=0, end=len(data), reader=next_batch)
    return Partition(value=json.dumps(item).encode())


def _travel(value, what):
    try:
        return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception as e:  # noqa: BLE001: whatever pickle says
        raise AssertionError(f"{what} cannot travel between tasks: {e}") from None


class Local:
    """The host, natively: the job's configuration, tokens and task ids, and the log
    lines its tasks wrote (``logs``, as ``(level, message)``)."""

    def __init__(
        self,
        config: Optional[dict] = None,
        tokens: Optional[dict] = None,
        app_id: str = "local",
        job_id: str = "1",
        batch_bytes: int = _api.BATCH_BYTES,
    ):
        self.config = {k: str(v) for k, v in (config or {}).items()}
        self.tokens = {
            service: Token(service, secret, 2**63 - 1) if isinstance(secret, str) else secret
            for service, secret in (tokens or {}).items()
        }
        self.app_id, self.job_id, self.batch_bytes = app_id, job_id, batch_bytes
        self.logs: list = []

    def _task(self, index: int, count: int) -> None:
        _api._local.update(config=self.config, tokens=self.tokens, logs=self.logs)
        _api._local["task"] = TaskInfo(self.app_id, self.job_id, index, count, 0)

    def map_reduce(self, job_class, inputs: Iterable[Any], partitions: int = 2, parts: bool = False) -> Any:
        """A ``MapReduce`` job's result over ``inputs``, one map task each, with
        ``partitions`` reduce tasks; with ``parts``, the reduce tasks' part files are
        kept in ``self.parts`` (their bytes, by partition), as ``--output`` writes them.

        As the host does it: each map's records are sorted by key and, for a job that
        combines, folded with ``combine``; a reduce task sees its keys in order, each
        key's values in the order of the maps that emitted them; outputs are merged
        left to right."""
        if partitions < 1:
            raise ValueError("a map/reduce job needs at least one reduce partition")
        job = job_class()
        inputs = list(inputs)
        by_partition: list = [[] for _ in range(partitions)]
        for index, item in enumerate(inputs):
            self._task(index, len(inputs))
            batches: list = []
            _shuffle.map_task(job, _partition(item, self.batch_bytes), partitions, batches.append)
            emitted = [r for batch in batches for r in _shuffle.records(batch)]
            for p, _, _ in emitted:
                if not 0 <= p < partitions:
                    raise AssertionError(f"a record went to partition {p} of {partitions}")
            emitted.sort(key=lambda r: (r[0], r[1]))
            flat = b"".join(_shuffle.HEADER.pack(p, len(k), len(v)) + k + v for p, k, v in emitted)
            combined = _shuffle.combine_sorted(job, flat)
            for p, k, v in _shuffle.records(flat if combined is None else combined):
                by_partition[p].append((k, index, v))
        outputs = []
        self.parts: list = []
        for p, records in enumerate(by_partition):
            self._task(p, partitions)
            records.sort(key=lambda r: (r[0], r[1]))
            sorted_batch = b"".join(_shuffle.HEADER.pack(p, len(k), len(v)) + k + v for k, _, v in records)
            pending = [sorted_batch] if sorted_batch else []
            written: list = []
            output = _shuffle.reduce_task(
                job, lambda _max: pending.pop() if pending else b"", written.append if parts else None
            )
            outputs.append(_travel(output, "the reduce task's output"))
            if parts:
                self.parts.append(b"".join(written))
        total = outputs[0]
        for output in outputs[1:]:
            total = _travel(job.merge(total, output), "the merged value")
        return _json(job.finish(total))

    def run(self, job_class, inputs: Iterable[Any]) -> Any:
        """The job's result over ``inputs``, one task each, as a cluster would give it:
        a ``Task`` job's list of outputs; an ``Aggregate``'s ``finish`` of the outputs
        merged left to right; a ``Combine``'s of its tasks added into one value."""
        if isinstance(job_class, type) and issubclass(job_class, _shuffle.MapReduce):
            raise TypeError(f"{job_class.__name__} is a MapReduce job: run it with map_reduce()")
        job = job_class()
        inputs = list(inputs)
        outputs = []
        acc = None
        for index, item in enumerate(inputs):
            self._task(index, len(inputs))
            partition = _partition(item, self.batch_bytes)
            if isinstance(job, Combine):
                acc = job.add(job.empty() if acc is None else acc, partition)
            else:
                outputs.append(_travel(job.run(partition), "the task's output"))
        if isinstance(job, Combine):
            total = _travel(job.empty() if acc is None else acc, "the combined value")
            result = job.finish(total)
        elif isinstance(job, Aggregate):
            if not outputs:
                raise AssertionError("an aggregate job needs at least one input")
            total = outputs[0]
            for output in outputs[1:]:
                total = _travel(job.merge(total, output), "the merged value")
            result = job.finish(total)
        else:
            result = outputs
        return _json(result)


def _json(result):
    try:
        return json.loads(json.dumps(result))
    except (TypeError, ValueError) as e:
        raise AssertionError(f"the job's result is not JSON: {e}") from None

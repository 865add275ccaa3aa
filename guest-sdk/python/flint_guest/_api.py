"""The SDK's public classes and the host's functions."""

from dataclasses import dataclass
from typing import Any, Iterator, Optional

try:  # Inside a component: the host, through the WIT contract.
    from wit_world.imports import host as _wit_host
    from wit_world.imports import types as _wit_types
except ImportError:  # Natively, in a job's own tests: `flint_guest.testing` plays the host.
    _wit_host = None
    _wit_types = None

# How many bytes of whole lines a split hands over at a time.
BATCH_BYTES = 1 << 20


class Fatal(Exception):
    """An error that trying the task again cannot mend (bad configuration, input that
    will never parse): the job fails at once instead of retrying the task."""


@dataclass
class TaskInfo:
    """Which task this is: ``app_id``, ``job_id``, ``task_index`` of ``task_count``,
    and ``attempt`` (0 for the first)."""

    app_id: str
    job_id: str
    task_index: int
    task_count: int
    attempt: int


@dataclass
class Token:
    """A delegation token the job's manifest asked for: ``secret`` until
    ``expires_at_ms`` (milliseconds since the Unix epoch)."""

    service: str
    secret: str
    expires_at_ms: int


class Partition:
    """What a task works on: ``index`` (a generated partition's number), ``value`` (one
    of the job's input values, as JSON bytes) or a file split (``path``, ``start``,
    ``end``, read with ``lines()`` or ``batches()``). The attributes that do not apply
    are ``None``."""

    def __init__(self, index=None, value=None, path=None, start=None, end=None, reader=None):
        self.index: Optional[int] = index
        self.value: Optional[bytes] = value
        self.path: Optional[str] = path
        self.start: Optional[int] = start
        self.end: Optional[int] = end
        self._reader = reader

    def batches(self, max_bytes: int = BATCH_BYTES) -> Iterator[bytes]:
        """A split's lines, whole lines about ``max_bytes`` at a time (each keeps its
        ``\\n``); a value's bytes once; nothing for a generated partition. The host
        reads the split as they are asked for, so memory does not grow with it."""
        if self._reader is not None:
            while True:
                batch = self._reader(max_bytes)
                if not batch:
                    return
                yield batch
        elif self.value is not None:
            yield self.value

    def lines(self) -> Iterator[str]:
        """A split's (or a value's) lines as text, without their ``\\n``; bytes that are
        not UTF-8 are replaced with U+FFFD."""
        for batch in self.batches():
            text = batch.decode("utf-8", "replace")
            if text.endswith("\n"):
                text = text[:-1]
            yield from text.split("\n")

    def read(self) -> bytes:
        """The whole split or value (a split's memory then grows with it)."""
        return b"".join(self.batches())

    def json(self) -> Any:
        """A value partition's JSON, decoded."""
        import json

        if self.value is None:
            raise Fatal("this task has no value partition to read as JSON")
        return json.loads(self.value)

    def __repr__(self) -> str:
        if self.index is not None:
            return f"Partition(index={self.index})"
        if self.path is not None:
            return f"Partition(path={self.path!r}, start={self.start}, end={self.end})"
        return f"Partition(value={self.value!r})"


class Task:
    """A job whose result is the list of its tasks' outputs, in partition order."""

    def run(self, partition: Partition) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define run(self, partition)")


class Aggregate(Task):
    """A job whose tasks' outputs fold into one result: ``merge`` two adjacent outputs
    (left, right), ``finish`` the fold into the job's result."""

    def merge(self, a: Any, b: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define merge(self, a, b)")

    def finish(self, total: Any) -> Any:
        return total


class Combine(Aggregate):
    """An ``Aggregate`` whose ``merge`` is commutative and associative: combined where
    its tasks run, into one running value a slot, which starts as ``empty()``."""

    def empty(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define empty(self)")

    def add(self, acc: Any, partition: Partition) -> Any:
        """Folds a partition into ``acc`` and returns the new running value (it may be
        ``acc`` itself, changed in place)."""
        return self.merge(acc, self.run(partition))


# The host, natively: set by `flint_guest.testing`.
_local = {"config": {}, "tokens": {}, "task": TaskInfo("local", "1", 0, 1, 0), "logs": []}


def config(key: str, default: Optional[str] = None) -> Optional[str]:
    """The job's configuration value for ``key`` (the manifest's ``[config]``,
    overridden by ``--conf``), or ``default``."""
    if _wit_host is None:
        return _local["config"].get(key, default)
    value = _wit_host.config(key)
    return default if value is None else value


def task_info() -> TaskInfo:
    """Which task this is."""
    if _wit_host is None:
        return _local["task"]
    t = _wit_host.current_task()
    return TaskInfo(t.app_id, t.job_id, t.task_index, t.task_count, t.attempt)


def token(service: str) -> Optional[Token]:
    """The current token for ``service``, if the manifest asked for it and the driver
    has one."""
    if _wit_host is None:
        return _local["tokens"].get(service)
    t = _wit_host.get_token(service)
    return None if t is None else Token(t.service, t.secret, t.expires_at_ms)


_LEVELS = ("trace", "debug", "info", "warn", "error")


def log(level: str, message: str) -> None:
    """A line in the task's log, at ``level`` (trace, debug, info, warn, error)."""
    if level not in _LEVELS:
        raise ValueError(f"no log level {level!r}: one of {', '.join(_LEVELS)}")
    if _wit_host is None:
        _local["logs"].append((level, message))
        return
    _wit_host.log(_wit_host.Level[level.upper()], message)


def debug(message: str) -> None:
    log("debug", message)


def info(message: str) -> None:
    log("info", message)


def warn(message: str) -> None:
    log("warn", message)


def error(message: str) -> None:
    log("error", message)

"""Flint's guest SDK for Python: write a job as a class, and Flint builds it into a
WebAssembly component (with componentize-py) that runs sandboxed like any job.

A job subclasses one of four classes, as the Rust SDK's traits:

- ``Task``: ``run(self, partition)`` returns the task's output; the job's result is
  the list of every task's output, in partition order.
- ``Aggregate``: also ``merge(self, a, b)``, which folds two outputs (of adjacent
  partitions, left then right), and ``finish(self, total)``, the job's result from the
  fold of all of them.
- ``Combine``: an ``Aggregate`` whose ``merge`` is commutative, combined where it runs:
  each slot keeps one running value, ``empty(self)`` to begin with, and adds each task
  to it with ``add(self, acc, partition)`` (by default ``merge(acc, run(partition))``).
- ``MapReduce``: ``map(self, partition, out)`` emits ``(key, value)`` records, the host
  moves them by key to the reduce tasks, and ``reduce(self, key, values, out)`` sees
  each key once with all its values (``groupByKey``; define ``combine(self, a, b)``
  for ``reduceByKey``); reduce outputs fold with ``merge`` and ``finish``, and a reduce
  may write a part file through ``part``.

Outputs cross from task to task pickled, so they must pickle; a job's result
(``finish``'s, or a ``Task`` job's list) must be JSON: ``dict`` keys ``str``, no
``bytes``.

An exception raised by a hook fails the task with its traceback; it is tried again, as
a flaky read would be, unless it is a ``Fatal``. A loop past the task's deadline and
memory past its cap end the task as ``deadline`` and ``memory-limit``, as in Rust.
"""

from ._api import (
    Aggregate,
    Combine,
    Fatal,
    Partition,
    Task,
    TaskInfo,
    Token,
    config,
    debug,
    error,
    info,
    log,
    task_info,
    token,
    warn,
)
from ._shuffle import Emitter, MapReduce, part

__all__ = [
    "Aggregate",
    "Combine",
    "Emitter",
    "Fatal",
    "MapReduce",
    "Partition",
    "Task",
    "TaskInfo",
    "Token",
    "config",
    "debug",
    "error",
    "info",
    "log",
    "part",
    "task_info",
    "token",
    "warn",
]

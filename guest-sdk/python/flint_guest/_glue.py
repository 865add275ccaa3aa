"""The component's exports over a job class: what `flint` builds around a Python job
(its generated entry module calls `bind`). Not part of the API."""

import json
import os
import pickle
import sys
import traceback

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

from . import _shuffle
from ._api import Aggregate, Combine, Fatal, Partition, Task
from ._shuffle import MapReduce

# The job's one instance, made when the component is built (and so already there in
# every instance of it).
_job = None
# A `Task` job's outputs are lists, merged by concatenation (its result is the list).
_collect = False


def bind(module, world):
    """Finds the job class in ``module`` (the one subclass of ``Task``, ``Aggregate``,
    ``Combine`` or ``MapReduce`` defined there that no other subclasses) and makes it
    the component's job, for ``world`` (``aggregate``, ``combine`` or ``map-reduce``)."""
    global _job, _collect
    defined = [
        c
        for c in vars(module).values()
        if isinstance(c, type) and issubclass(c, Task) and c.__module__ == module.__name__
    ]
    leaves = [c for c in defined if not any(o is not c and issubclass(o, c) for o in defined)]
    if len(leaves) != 1:
        names = ", ".join(sorted(c.__name__ for c in leaves)) or "none"
        raise TypeError(
            f"{module.__name__}.py must define one job class (a subclass of flint_guest.Task, "
            f"Aggregate, Combine or MapReduce), found {names}"
        )
    cls = leaves[0]
    if issubclass(cls, MapReduce):
        hooks = [
            ("map", MapReduce, "map(self, partition, out)"),
            ("reduce", MapReduce, "reduce(self, key, values, out)"),
            ("empty", MapReduce, "empty(self)"),
        ]
    else:
        hooks = [("run", Task, "run(self, partition)")]
    if issubclass(cls, Aggregate):
        hooks.append(("merge", Aggregate, "merge(self, a, b)"))
    if issubclass(cls, Combine):
        hooks.append(("empty", Combine, "empty(self)"))
    missing = [sig for name, base, sig in hooks if getattr(cls, name) is getattr(base, name)]
    if missing:
        raise TypeError(f"{cls.__name__} must define {' and '.join(missing)}")
    fits = "map-reduce" if issubclass(cls, MapReduce) else "combine" if issubclass(cls, Combine) else "aggregate"
    if fits != world:
        raise TypeError(f"{cls.__name__} was built for the {world} world, which does not fit it")
    _job = cls()
    _collect = not issubclass(cls, Aggregate)


def _failure(e):
    """The task's failure for exception ``e``: its traceback, retried unless Fatal."""
    # From the job's own frames: the glue's say nothing to its author.
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.endswith("_glue.py"):
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(e), e, tb)).rstrip()
    # The job's folder is the build's second path, /1: its files by their own names.
    text = text.replace('File "/1/', 'File "')
    if isinstance(e, ModuleNotFoundError) and e.name:
        text += (
            f"\n(a Python job holds the modules imported while it was built: "
            f"import {e.name} at the top of the job's module)"
        )
    return Err(types.TaskError(message=text, retryable=not isinstance(e, Fatal)))


def _call(hook, *args):
    try:
        return hook(*args)
    except MemoryError:
        # Past the memory cap (the host refused to grow the memory): the traceback to
        # the log, then a trap, which the host reports as `memory-limit`. Raising it on
        # would make the bindings panic, which reads as the guest's own failure.
        try:
            sys.stderr.write(traceback.format_exc())
            sys.stderr.flush()
        finally:
            os.abort()
    except Err:
        raise
    except BaseException as e:  # noqa: BLE001: every failure is the task's
        raise _failure(e) from None


def _partition(p):
    if isinstance(p, types.Partition_Index):
        return Partition(index=p.value)
    if isinstance(p, types.Partition_Value):
        return Partition(value=p.value)
    split = p.value
    return Partition(path=split.path, start=split.start, end=split.end, reader=split.lines.next)


def _encode(value, what):
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise Fatal(f"{what} cannot be sent on ({e}): it must pickle") from None


def _json(value):
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    except (TypeError, ValueError) as e:
        raise Fatal(f"the job's result is not JSON ({e}): use dict with str keys, list, str, int, float") from None


def _run(partition):
    output = _job.run(_partition(partition))
    return _encode([output] if _collect else output, "the task's output")


def _merge(a, b):
    if _collect:
        a.extend(b)
        return a
    return _job.merge(a, b)


def _finish(value):
    return _json(value if _collect else _job.finish(value))


class Job(exports.Job):
    def run(self, input):
        return _call(_run, input)


class Accumulator:
    """Outputs folded, kept decoded in the instance between calls."""

    def __init__(self, value):
        self.value = value

    @classmethod
    def load(cls, output):
        return _call(lambda: cls(pickle.loads(output)))

    def absorb(self, right):
        def absorb():
            self.value = _merge(self.value, right.value)

        _call(absorb)

    def encode(self):
        return _call(lambda: _encode(self.value, "the partial result"))

    def finish(self):
        return _call(lambda: _finish(self.value))


# The slot's running value in this live instance (the bindings may make a `Combiner`
# per call, so it is kept here).
_acc = None


class Combiner(getattr(exports, "Combiner", object)):  # the combine world only
    def add(self, input):
        def add():
            global _acc
            acc = _job.empty() if _acc is None else _acc
            _acc = _job.add(acc, _partition(input))

        _call(add)

    def take(self):
        def take():
            global _acc
            acc = _job.empty() if _acc is None else _acc
            _acc = None
            return _encode(acc, "the combined value")

        return _call(take)


class MapReduceJob(getattr(exports, "MapReduceJob", object)):  # the map-reduce world only
    def map(self, input, out):
        _call(lambda: _shuffle.map_task(_job, _partition(input), out.partitions(), out.emit))

    def reduce(self, partition, input, part):
        def reduce():
            write = None if part is None else part.write
            return _encode(_shuffle.reduce_task(_job, input.next, write), "the reduce task's output")

        return _call(reduce)


class MapCombiner(getattr(exports, "MapCombiner", object)):  # the map-reduce world only
    def combine_sorted(self, batch):
        return _call(lambda: _shuffle.combine_sorted(_job, batch))

# The component's entry module, which `flint` writes beside a Python job: it binds the
# job module's class to the exports. MODULE and WORLD are filled in by `flint`.
import flint_guest._glue as _glue

import MODULE as _job_module

_glue.bind(_job_module, "WORLD")
Job = _glue.Job
Combiner = _glue.Combiner
MapReduceJob = _glue.MapReduceJob
MapCombiner = _glue.MapCombiner

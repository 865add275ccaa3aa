# The `aggregator` interface's resource, which componentize-py looks for in a module
# of the interface's name. Generated beside a Python job by `flint`; not part of the API.
from flint_guest._glue import Accumulator  # noqa: F401

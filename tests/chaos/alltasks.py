"""Every kind of the chaos soak in one worker: the ordinary kinds (``tests.chaos.tasks``)
and the grouped ones (``tests.chaos.grouptasks``). The long runs' ordinary workers run this
module whenever the grouped kinds are in the load, so a worker's grouped claim takes its
turn beside its ordinary claim under the faults (docs/chaos.md, "Groups in the soak");
the four grouped workers run the grouped kinds alone."""

from . import grouptasks, tasks  # noqa: F401  (their import declares the tasks)

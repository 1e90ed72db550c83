"""xdist's `loadgroup` scheduling, made to survive a lost test process.

A test past its timeout ends its test process (pyproject.toml's `timeout_method`), and xdist
starts another. xdist 3.8's `loadgroup` then hangs the run (pytest-xdist #1323, #1327, #1378;
a CI run sat for 90 minutes): it puts every unit the lost process ever had back on the queue,
finished ones too, which later go out as empty work that never completes; the new process
may get a single test, which it never starts (a test process runs a test only once it knows
the next, or that none comes); and the test the process was lost on goes out again, to take
the next process down with it. Fixed releases are not out; the suite schedules with this.
"""

from __future__ import annotations

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadGroupScheduling
from xdist.workermanage import WorkerController

# A test process keeps this many tests queued beyond the one it runs (xdist's own heuristic).
QUEUED = 2


class LostProcessSafeGroupScheduling(LoadGroupScheduling):
    def remove_node(self, node: WorkerController) -> str | None:
        """Puts back what the lost process had not run, except the test it was lost on
        (xdist reports that one failed); returns that test, or None when nothing was lost."""
        workload = self.assigned_work.pop(node)
        pending = {
            scope: [nodeid for nodeid, done in unit.items() if not done]
            for scope, unit in workload.items()
        }
        lost_on = next((nodeids[0] for nodeids in pending.values() if nodeids), None)
        if lost_on is None:
            return None
        for scope, nodeids in pending.items():
            rest = [nodeid for nodeid in nodeids if nodeid != lost_on]
            if rest:
                self.workqueue[scope] = dict.fromkeys(rest, False)
                self.workqueue.move_to_end(scope, last=False)  # before the untouched units
        for other in list(self.assigned_work):
            self._reschedule(other)
        return lost_on

    def _reschedule(self, node: WorkerController) -> None:
        """Tops the node's queue up to QUEUED tests past the one it runs, and tells it when no
        more will come: a node holding one test waits for either before starting it."""
        if node.shutting_down:
            return
        while self.workqueue and self._pending_of(self.assigned_work[node]) <= QUEUED:
            self._assign_work_unit(node)
        if not self.workqueue:
            node.shutdown()


def make_scheduler(config: pytest.Config, log: Producer) -> LoadGroupScheduling | None:
    """For `pytest_xdist_make_scheduler`: the scheduler above for `--dist loadgroup`, else
    xdist's own (None)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return LostProcessSafeGroupScheduling(config, log)

"""``rotate lab up | down | status | fault``: the lab's lifecycle (docs/lab.md).

:mod:`.lifecycle` (up, down, status) starts the parts through :mod:`.launch` and keeps
their pids in the lab directory (:mod:`.labdir`); :mod:`.fault_switch` switches faults.
This package's names below are what ``rotate lab`` (``rotate_lab.cli``) and the tests call.
"""

from rotate_lab.control.fault_switch import fault
from rotate_lab.control.lifecycle import LabFailed, down, not_ready, status, up

__all__ = ["LabFailed", "down", "fault", "not_ready", "status", "up"]

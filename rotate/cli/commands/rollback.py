"""``rotate rollback RUN_ID --confirm`` — restore the values a run replaced, through the chain.

Without ``--confirm`` nothing is changed: the run as journaled is shown, with the command
that would roll it back.
"""

from __future__ import annotations

from rotate.cli.commands.journaled import journaled_command

rollback = journaled_command(
    "rollback", "Restore the values a run replaced, through the whole chain.",
    lambda engine, options, run_id, observer, cancel, _value: engine.rollback(
        options, run_id, observer, cancel),
    takes=("force",))

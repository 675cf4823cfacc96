"""``rotate resume RUN_ID --confirm`` — continue a failed or interrupted run.

The engine replays the journal and observes what is already done (it never writes a step
twice). Without ``--confirm`` nothing is changed: the run as journaled is shown, with the
command that would continue it.
"""

from __future__ import annotations

from rotate.cli.commands.journaled import journaled_command

resume = journaled_command(
    "resume", "Continue a failed or interrupted run.",
    lambda engine, options, run_id, observer, cancel, value: engine.resume(
        options, run_id, observer, cancel, new_value=value),
    takes=("value_stdin",))

"""What a plug-in command (an entry point of group ``rotate.plugins``, e.g. ``rotate lab``)
may use of the product: exactly the names below, plus the errors of
:mod:`rotate.core.errors` (a plug-in raises ``RotateError`` subclasses so that the CLI
prints them and exits with their codes, as for its own commands).

Everything else in ``rotate`` is internal and may change without notice; the lab is held to
this by an import-linter contract (pyproject ``[tool.importlinter]``, ``lab-surface``).
Keeping these names working — same meaning, compatible signatures — is the product's
promise to its plug-ins (docs/design.md, "The lab").

- :class:`Console`, :func:`console_for`: the one output object of a command (stdout for the
  result, stderr for notes; ``-o json`` prints one document);
- :class:`Output`, :data:`OutputOpt`: the ``-o text|json|yaml`` option as every command takes it
  (``Console.json_mode`` is true for json and yaml: ``Console.json`` writes the one document
  in the format asked for);
- :func:`aligned`: rows as aligned text lines, as the product's tables print them;
- :func:`state_of`: the invocation's ``CliState``, whose ``extra`` carries what a test hands
  a plug-in command instead of its real collaborators.
"""

from __future__ import annotations

from rotate.cli.columns import aligned
from rotate.cli.console import Console, console_for
from rotate.cli.options import Output, OutputOpt
from rotate.cli.state import state_of

__all__ = ["Console", "Output", "OutputOpt", "aligned", "console_for", "state_of"]

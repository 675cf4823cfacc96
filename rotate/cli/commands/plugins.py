"""Commands that plugins provide: ``rotate lab …``, the gate to the lab, a separate
distribution (``rotate-lab``).

The lab plugs in through the entry point ``rotate.plugins:lab`` (a Typer app).  The product
never imports the lab by name: this gate looks the entry point up only when ``rotate lab``
is parsed, so ``rotate --help`` and every other command pay nothing for it.  Without the
lab installed, ``rotate lab …`` is a usage error (exit 2) that says how to get it.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from rotate.cli.coercion import LightCommand
from rotate.core.errors import UsageError

PLUGIN_GROUP = "rotate.plugins"
LAB_PLUGIN = "lab"
LAB_MISSING = "`rotate lab` needs the lab, which is not installed (distribution rotate-lab)"
LAB_INSTALL_HINT = ("from a checkout of rotate: make install (or: pip install -e ./lab); "
                    "the product alone never needs it")


def load_plugin(name: str) -> Any | None:
    """The click command behind entry point ``rotate.plugins:NAME``, or None if absent."""
    # Imported here: importlib.metadata costs ~40 ms of start-up every other command
    # would pay (bench/startup.py).
    from importlib.metadata import entry_points

    found = entry_points(group=PLUGIN_GROUP, name=name)
    if not found:
        return None
    target = next(iter(found)).load()
    return typer.main.get_command(target) if isinstance(target, typer.Typer) else target


class LabGate(TyperGroup):
    """A group whose commands are the lab plugin's, loaded on first use."""

    _plugin: Any | None = None

    def _lab(self) -> Any:
        if self._plugin is None:
            self._plugin = load_plugin(LAB_PLUGIN)
        if self._plugin is None:
            raise UsageError(LAB_MISSING, hint=LAB_INSTALL_HINT)
        return self._plugin

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        self._lab()
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self._lab().list_commands(ctx))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The plugin's command, as a :class:`LightCommand` when it is a plain typer command
        (same object, same state): its usage errors then read as the product's — a bad
        choice or number without pydantic's phrases, a missing option value under the
        command's usage line."""
        command = self._lab().get_command(ctx, cmd_name)
        if type(command) is TyperCommand:
            command.__class__ = LightCommand
        return command


lab_app = typer.Typer(
    name="lab", cls=LabGate,
    help="The local lab: Kubernetes API, OpenBao, Config Center, the shop.",
    no_args_is_help=True, rich_markup_mode=None, add_completion=False,
    pretty_exceptions_enable=False)

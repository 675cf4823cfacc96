"""Option values converted without pydantic, for the commands' common parameter types.

Why: typer ≥ 0.29 converts *every* parameter value through a pydantic ``TypeAdapter`` —
even a plain ``Path``, ``str`` or enum, and even when the value is the default — so the
first command parameter processed imports pydantic (plus pydantic-core, annotated-types
and, through pydantic's plugin loader, importlib.metadata): about 80 ms of the start-up of
``rotate list``, more than the command's own work (bench/startup.py, docs/performance.md).

:class:`LightCommand` makes its typer options and arguments :class:`LightOption` and
:class:`LightArgument`, whose ``process_value`` (click's public hook: value → converted
value, then the missing check and the callback) converts ``str``, ``bool``, ``int``, enum
choice, ``Path`` and parsed parameters as typer's adapter does: a ``str`` or ``bool`` that
already is one is kept, a choice is matched as typer matches it (the enum's values, case
folded unless the option is case sensitive, through the context's token normaliser), a
``Path`` is built by its constructor (what pydantic's lax ``Path`` validation does with a
string), an ``int`` is one or a string of ASCII digits within the option's ``min``/``max``, a
parameter with a ``parser`` (``--timeout``) gets what the parser returns. Every other type
and every value the light converter cannot take (a bool given as text, a choice that
matches none, a signed or out-of-range number, a value the parser rejects, an unreadable
path) goes to typer's own ``process_value``, so an invalid value yields typer's message and
exit code, byte for byte.

Only public names are used: ``typer.core.TyperOption``/``TyperArgument``, their
``type_descriptor`` (annotation + ``typer.models.ParameterInfo``) and click's
``process_value``. Should a typer release change them, a parameter without the expected
descriptor is left to typer: slower, never different (tests/unit/test_cli_startup.py fails
on the lost speed, tests/unit/test_cli_coercion.py on any difference in behaviour).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

from typer.core import TyperArgument, TyperCommand, TyperOption

#: what a converter returns for a value it leaves to typer's own conversion
_TO_TYPER = object()

Convert = Callable[[Any, Any], Any]  # (value, ctx) → value or _TO_TYPER


def _plain_str(value: Any, ctx: Any) -> Any:
    return value if type(value) is str else _TO_TYPER


def _plain_bool(value: Any, ctx: Any) -> Any:
    return value if type(value) is bool else _TO_TYPER  # "yes"/"0" from an env var: typer's


def _choice(choices: tuple[Enum, ...], case_sensitive: bool) -> Convert:
    def normal(text: str, ctx: Any) -> str:
        normalise = getattr(ctx, "token_normalize_func", None)
        if normalise is not None:
            text = normalise(text)
        return text if case_sensitive else text.casefold()

    def convert(value: Any, ctx: Any) -> Any:
        if any(value is choice for choice in choices):
            return value
        if type(value) is not str:
            return _TO_TYPER
        wanted = normal(value, ctx)
        return next((c for c in choices if normal(str(c.value), ctx) == wanted), _TO_TYPER)
    return convert  # no match: typer words the error (and lists the choices)


def _path(path_type: type[Path], readable: bool) -> Convert:
    def convert(value: Any, ctx: Any) -> Any:
        if type(value) is str:
            value = path_type(value)
        if not isinstance(value, path_type):
            return _TO_TYPER
        if readable and os.path.exists(value) and not os.access(value, os.R_OK):
            return _TO_TYPER  # typer words "is not readable"
        return value
    return convert


def _parsed(parser: Callable[[Any], Any]) -> Convert:
    def convert(value: Any, ctx: Any) -> Any:
        try:
            return parser(value)  # typer's adapter hands back what the parser returns
        except Exception:
            return _TO_TYPER  # typer calls the parser again and words its error
    return convert


def _int(minimum: Any, maximum: Any) -> Convert:
    def convert(value: Any, ctx: Any) -> Any:
        if type(value) is str and value.isascii() and value.isdigit():
            value = int(value)  # what pydantic's lax int gives for plain digits
        if type(value) is not int:
            return _TO_TYPER  # signs, spaces, floats, bools: typer's
        if (minimum is not None and value < minimum) or (maximum is not None
                                                         and value > maximum):
            return _TO_TYPER  # typer words the range error
        return value
    return convert


def _plain_path_option(info: Any) -> bool:
    """A ``Path`` parameter with none of the checks typer would make on it but readability
    (no ``exists``, ``resolve_path``, ``writable``, file/dir restriction, dash or type)."""
    return (getattr(info, "path_type", None) is None and not getattr(info, "allow_dash", False)
            and not getattr(info, "exists", False) and not getattr(info, "resolve_path", False)
            and not getattr(info, "writable", False) and getattr(info, "file_okay", True)
            and getattr(info, "dir_okay", True))


def converter(param: Any) -> Convert | None:
    """The light converter of a typer parameter, or None to leave it to typer."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or getattr(descriptor, "file_annotation", None) is not None:
        return None
    annotation, info = descriptor.annotation, descriptor.parameter_info
    if getattr(info, "click_type", None) is not None:
        return None
    if info.parser is not None:
        return _parsed(info.parser)
    if annotation is int and not info.clamp:
        return _int(info.min, info.max)
    if annotation is str:
        return _plain_str
    if annotation is bool:
        return _plain_bool
    if not isinstance(annotation, type):
        return None
    if issubclass(annotation, Enum):
        return _choice(tuple(annotation), bool(info.case_sensitive))
    if issubclass(annotation, Path) and _plain_path_option(info):
        return _path(annotation, bool(getattr(info, "readable", True)))
    return None


def _process(param: Any, ctx: Any, value: Any, typers: Callable[[Any, Any], Any]) -> Any:
    """The light conversion of ``value`` when it has one, else ``typers`` (typer's own).
    A single value that is None stays None, as typer has it; a required one that is missing
    is typer's to report."""
    convert = converter(param) if param.nargs == 1 and not param.multiple else None
    if convert is None:
        return typers(ctx, value)
    converted = None if value is None else convert(value, ctx)
    if converted is _TO_TYPER or (param.required and param.value_is_missing(converted)):
        return typers(ctx, value)
    return param.callback(ctx, param, converted) if param.callback is not None else converted


# Single inheritance, no new state: an instance of typer's class can become one of these
# (``__class__`` assignment needs the same layout, which a mixin base would change).
class LightOption(TyperOption):
    def process_value(self, ctx: Any, value: Any) -> Any:
        return _process(self, ctx, value, super().process_value)


class LightArgument(TyperArgument):
    def process_value(self, ctx: Any, value: Any) -> Any:
        return _process(self, ctx, value, super().process_value)


def lighten(params: list[Any]) -> None:
    """Make each plain typer option and argument its light form (same object, same state:
    the light class adds only ``process_value``)."""
    for param in params:
        if type(param) is TyperOption:
            param.__class__ = LightOption
        elif type(param) is TyperArgument:
            param.__class__ = LightArgument


class LightCommand(TyperCommand):
    """A typer command whose str, bool, int, Path, parsed and choice parameters convert
    without pydantic (a group does the same with :func:`lighten` in its ``parse_args``)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        lighten(self.get_params(ctx))
        return super().parse_args(ctx, args)

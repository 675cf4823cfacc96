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
path) goes to typer's own ``process_value``, so an invalid value yields typer's exit code and
message — except for a choice or a whole number, where typer's message quotes pydantic
("Value error, 'xml' is not one of …", "Input should be a valid integer, unable to parse
string as an integer"): those are reworded as click words them, listing the choices
(:func:`_wording`). :class:`LightCommand` also puts its context on a usage error the parser
raised without one ("Option '-o' requires an argument."), so that it is printed under the
command's usage line like every other.

Only public names are used: ``typer.core.TyperOption``/``TyperArgument``, their
``type_descriptor`` (annotation + ``typer.models.ParameterInfo``) and click's
``process_value``. Should a typer release change them, a parameter without the expected
descriptor is left to typer: slower, never different (tests/unit/test_cli_startup.py fails
on the lost speed, tests/unit/test_cli_coercion.py on any difference in behaviour).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

import typer
from typer.core import TyperArgument, TyperCommand, TyperOption

#: click's ``UsageError``, the base of every parse-time usage error (a bad option value, a
#: missing argument, an unknown option). typer vendors click and exports only its
#: ``BadParameter`` subclass, so the class is reached through that public name
#: (tests/unit/test_cli_coercion.py checks it is still ``UsageError``).
ClickUsageError: Any = typer.BadParameter.__mro__[1]

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


def _shown(value: Any) -> str:
    return f"'{value}'"


def _wording(param: Any) -> Callable[[Any], str] | None:
    """How to word a value of ``param`` that typer refused, for a choice or a whole number
    (typer words them with pydantic's text: "Value error, 'x' is not one of …", "Input
    should be a valid integer, unable to parse string as an integer"); None for any other
    parameter, whose refusal typer words itself (a parser's or a callback's own message)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or param.callback is not None:
        return None
    annotation = descriptor.annotation
    if get_origin(annotation) in (list, tuple):
        annotation = next(iter(get_args(annotation)), None)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        values = [str(choice.value) for choice in annotation]
        listed = ", ".join(f"'{v}'" for v in values)

        def not_a_choice(value: Any) -> str:
            items = value if isinstance(value, list | tuple) else [value]
            folded = {v.casefold() for v in values}
            bad = next((v for v in items if str(v).casefold() not in folded), value)
            return f"{_shown(bad)} is not one of {listed}."
        return not_a_choice
    if annotation is int:
        info = descriptor.parameter_info
        low, high = info.min, info.max
        bounds = (f" from {low} to {high}" if low is not None and high is not None else
                  f" >= {low}" if low is not None else f" <= {high}" if high is not None
                  else "")
        return lambda value: f"expected a whole number{bounds}, got {_shown(value)}."
    return None


def _typers(param: Any, ctx: Any, value: Any, typers: Callable[[Any, Any], Any]) -> Any:
    """typer's own conversion; a choice or whole number it refuses is reworded
    (:func:`_wording`): still a usage error (exit 2), without pydantic's phrases."""
    try:
        return typers(ctx, value)
    except typer.BadParameter as exc:
        wording = _wording(param)
        if type(exc) is not typer.BadParameter or wording is None \
                or param.value_is_missing(value):
            raise
        raise typer.BadParameter(wording(value), ctx=ctx, param=param) from None


def _process(param: Any, ctx: Any, value: Any, typers: Callable[[Any, Any], Any]) -> Any:
    """The light conversion of ``value`` when it has one, else ``typers`` (typer's own).
    A single value that is None stays None, as typer has it; a required one that is missing
    is typer's to report."""
    convert = converter(param) if param.nargs == 1 and not param.multiple else None
    if convert is None:
        return _typers(param, ctx, value, typers)
    converted = None if value is None else convert(value, ctx)
    if converted is _TO_TYPER or (param.required and param.value_is_missing(converted)):
        return _typers(param, ctx, value, typers)
    return param.callback(ctx, param, converted) if param.callback is not None else converted


# Single inheritance, no new state: an instance of typer's class can become one of these
# (``__class__`` assignment needs the same layout, which a mixin base would change).
class LightOption(TyperOption):
    def process_value(self, ctx: Any, value: Any) -> Any:
        return _process(self, ctx, value, super().process_value)


class LightArgument(TyperArgument):
    def process_value(self, ctx: Any, value: Any) -> Any:
        return _process(self, ctx, value, super().process_value)

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        """``RUN_ID`` for a required argument, ``[CREDENTIAL]...`` for optional ones — as
        click and the docs write them; typer ≥ 0.29 writes a required one ``{RUN_ID}``."""
        name = str(self.metavar or (self.name or "").upper())
        if not self.required and not name.startswith("["):
            name = f"[{name}]"
        return [name + ("..." if self.nargs != 1 else "")]

    def display_type_rich(self, ctx: Any) -> str | None:
        """No ``<str>``/``<list[str]>`` after a named argument: the metavar and the help say
        what it is; Python's type names mean nothing to an operator."""
        return None if self.metavar is not None else super().display_type_rich(ctx)


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
        with usage_in(ctx):
            return super().parse_args(ctx, args)


@contextmanager
def usage_in(ctx: Any) -> Iterator[None]:
    """A usage error raised while parsing without a context (click's parser raises "Option
    '-o' requires an argument." bare) gets ``ctx``, so it is printed, like every other
    usage error, under the command's usage line and its "Try … -h" hint."""
    try:
        yield
    except ClickUsageError as exc:
        if getattr(exc, "ctx", None) is None:
            exc.ctx = ctx
        raise

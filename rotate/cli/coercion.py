"""Option values converted without pydantic, for the commands' common parameter types.

Why: typer ≥ 0.29 converts *every* parameter value through a pydantic ``TypeAdapter`` —
even a plain ``Path``, ``str`` or enum, and even when the value is the default — so the
first command parameter processed imports pydantic (plus pydantic-core, annotated-types
and, through pydantic's plugin loader, importlib.metadata): about 80 ms of the start-up of
``rotate list``, more than the command's own work (bench/startup.py, docs/performance.md).

:class:`LightCommand` hands ``str``, ``bool``, ``int``, choice, ``Path`` and parsed
parameters a converter that does what typer's adapter does for them, with typer's own
helpers: a ``str`` or ``bool`` that already is one is kept, a choice is matched by
``coerce_cli_choice``, a ``Path`` is built by its constructor (what pydantic's lax ``Path``
validation does with a string) and checked by ``coerce_cli_path``, an ``int`` is one or a
string of ASCII digits within the option's ``min``/``max``, a parameter with a ``parser``
(``--timeout``) gets what the parser returns. Every other type and every value the light
converter cannot take (a bool given as text, a choice that matches none, a signed or
out-of-range number, a value the parser rejects) is handed to typer's own runtime
parameter, so an invalid value yields typer's message and exit code, byte for byte.

This relies on typer internals (``typer._coercion.RuntimeParam`` and the parameter's
``_runtime_param`` slot). Should a typer release move them, :func:`light_runtime_param`
returns None and typer's own coercion runs: slower, never different
(tests/unit/test_cli_startup.py fails on the lost speed, not on behaviour).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.core import TyperCommand

try:
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import (
        choice_coercion_annotation,
        coerce_cli_choice,
        coerce_cli_path,
        lenient_issubclass,
    )
except ImportError:  # pragma: no cover - another typer: its own coercion, unchanged
    RuntimeParam = None  # type: ignore[assignment,misc]

#: what a converter returns for a value it leaves to typer's own coercion
_TO_TYPER = object()

Convert = Callable[[Any, Any, Any], Any]  # (value, param, ctx) → value or _TO_TYPER


def _plain_str(value: Any, param: Any, ctx: Any) -> Any:
    return value if type(value) is str else _TO_TYPER


def _plain_bool(value: Any, param: Any, ctx: Any) -> Any:
    return value if type(value) is bool else _TO_TYPER  # "yes"/"0" from an env var: typer's


def _choice(choices: tuple[Any, ...], case_sensitive: bool) -> Convert:
    def convert(value: Any, param: Any, ctx: Any) -> Any:
        try:
            return coerce_cli_choice(value, choices=choices, case_sensitive=case_sensitive,
                                     ctx=ctx)
        except ValueError:
            return _TO_TYPER  # typer words the error (and lists the choices)
    return convert


def _path(path_type: type[Path], info: Any) -> Convert:
    def convert(value: Any, param: Any, ctx: Any) -> Any:
        if type(value) is str:
            value = path_type(value)
        if not isinstance(value, path_type):
            return _TO_TYPER
        return coerce_cli_path(value, info, path_type=path_type, param=param, ctx=ctx)
    return convert


def _parsed(parser: Callable[[Any], Any]) -> Convert:
    def convert(value: Any, param: Any, ctx: Any) -> Any:
        try:
            return parser(value)  # typer's adapter hands back what the parser returns
        except Exception:
            return _TO_TYPER  # typer calls the parser again and words its error
    return convert


def _int(minimum: Any, maximum: Any) -> Convert:
    def convert(value: Any, param: Any, ctx: Any) -> Any:
        if type(value) is str and value.isascii() and value.isdigit():
            value = int(value)  # what pydantic's lax int gives for plain digits
        if type(value) is not int:
            return _TO_TYPER  # signs, spaces, floats, bools: typer's
        if (minimum is not None and value < minimum) or (maximum is not None
                                                         and value > maximum):
            return _TO_TYPER  # typer words the range error
        return value
    return convert


def _converter(annotation: Any, info: Any) -> Convert | None:
    """The light converter for a parameter typed ``annotation``, or None for typer's."""
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
    choice = choice_coercion_annotation(annotation, info)
    if choice is not None:
        return _choice(tuple(choice[0]), bool(choice[1]))
    if (lenient_issubclass(annotation, Path) and info.path_type is None
            and not getattr(info, "allow_dash", False)):
        return _path(annotation, info)
    return None


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class _LightRuntimeParam(RuntimeParam):
        """Converts with ``convert``; what it cannot convert goes to typer's adapter."""

        convert: Convert

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            converted = self.convert(value, param, ctx)
            if converted is _TO_TYPER:
                typer_own = build_runtime_param(param.type_descriptor)
                return typer_own._coerce_value(value, param=param, ctx=ctx)
            return converted


def light_runtime_param(param: Any) -> Any | None:
    """The light runtime parameter for a typer parameter, or None to keep typer's."""
    if RuntimeParam is None or not hasattr(param, "_runtime_param"):
        return None
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or descriptor.file_annotation is not None:
        return None
    convert = _converter(descriptor.annotation, descriptor.parameter_info)
    if convert is None:
        return None
    return _LightRuntimeParam(parameter_info=descriptor.parameter_info,
                              annotation=descriptor.annotation, convert=convert)


def lighten(params: list[Any]) -> None:
    """Give each parameter typer has not yet built a runtime for its light one, if any."""
    for param in params:
        if getattr(param, "_runtime_param", True) is None:
            light = light_runtime_param(param)
            if light is not None:
                param._runtime_param = light


class LightCommand(TyperCommand):
    """A typer command whose str, bool, Path and choice parameters convert without
    pydantic (a group does the same with :func:`lighten` in its ``parse_args``)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        lighten(self.get_params(ctx))
        return super().parse_args(ctx, args)

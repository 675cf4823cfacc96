"""The ``rotate`` command: a typer app whose first word is a command *or* a credential.

``rotate dragonfly --confirm`` is the canonical use (cli.md), next to ``rotate list``,
``rotate runs`` … :class:`RotateGroup` resolves a first word that is not a command to the
hidden ``rotate`` command, which takes it as CREDENTIAL. A credential may not be named like
a command, so there is no ambiguity.

Start-up cost matters (an operator runs ``rotate --help`` and ``rotate list`` often):
this module imports typer and our own light modules only. Rich help formatting is off
(plain click help: cheaper and stable for golden tests); rich itself, the engine and the
lab are imported inside the command functions; every command is a
:class:`~rotate.cli.coercion.LightCommand`, so its options convert without pydantic.

The root group also carries ``--version`` (the installed distribution's version) and typer's
``--install-completion``/``--show-completion``; :meth:`RotateGroup.shell_complete` adds the
chain file's credential names to the first word's completions (docs/cli.md).

Exit codes (cli.md): the command's own (report exit code, 0/3 for plans); a
:class:`~rotate.core.errors.RotateError` exits with its ``exit_code`` and prints its
message, which is safe by contract; click usage errors exit 2; anything else is a bug:
exit 1, "internal error (a bug)" and the exception's *type* only — its text may carry a
secret or a URL. ``ROTATE_DEBUG=1`` prints the traceback. The same holds for an exception
that kills a background thread (``threading.excepthook``, set for the command's duration).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from rotate.cli.coercion import ClickUsageError, LightCommand, lighten, usage_in
from rotate.cli.commands import (
    doctor,
    due,
    list_cmd,
    resume,
    rollback,
    rotate_cmd,
    runs,
    show,
    status,
    watch,
)
from rotate.cli.commands.init_cmd import init
from rotate.cli.commands.plugins import lab_app
from rotate.cli.commands.rbac import rbac
from rotate.cli.commands.vault_policy import vault_policy
from rotate.cli.console import CONSOLE_KEY, Console
from rotate.cli.options import missing_chain
from rotate.core.errors import EXIT_INTERNAL, EXIT_USAGE, ChainFileError, RotateError

CREDENTIAL_COMMAND = "rotate"
ARGV_KEY = "rotate.argv"


@dataclass(frozen=True)
class Completion:
    """One completion of the first word: what the shell formatters read of click's
    ``CompletionItem`` (value, type, help), without importing typer's vendored click."""

    value: str
    help: str | None = None
    type: str = "plain"


class _CredentialContext(typer.Context):
    """Context of the hidden command: its path is the group's and CREDENTIAL, so usage and
    error messages read ``rotate CREDENTIAL [OPTIONS]`` and ``Try 'rotate CREDENTIAL -h'``
    (the rotation options; ``rotate -h`` lists the commands) rather than ``rotate rotate …``.
    The credential typed is not repeated: a usage error may be about that very word."""

    @property
    def command_path(self) -> str:
        root = self.parent.command_path if self.parent is not None else "rotate"
        return f"{root} CREDENTIAL"


class CredentialCommand(LightCommand):
    context_class = _CredentialContext

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return ["[OPTIONS]"]


class RotateGroup(TyperGroup):
    """Commands first; any other first word is a CREDENTIAL for the hidden command."""

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        """The first word completes to the commands and the chain file's credentials."""
        from rotate.cli.completion import chain_for_completion, credential_names

        items: list[Any] = list(super().shell_complete(ctx, incomplete))
        if not incomplete.startswith("-"):
            items += [Completion(name, help="credential")
                      for name in credential_names(chain_for_completion())
                      if name.startswith(incomplete) and name not in self.commands]
        return items

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [self.subcommand_metavar]

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        lighten(self.get_params(ctx))
        with usage_in(ctx):
            result: list[str] = super().parse_args(ctx, self.command_first(ctx, args))
        return result

    def command_first(self, ctx: Any, args: list[str]) -> list[str]:
        """``args`` with the first word (a command or CREDENTIAL) moved before the options
        that precede it, so that ``rotate --chain f.yaml dragonfly`` is ``rotate dragonfly
        --chain f.yaml``, as kubectl and helm take flags on either side.

        The options before the word are skipped with their values: an option takes the next
        word as its value when some command declares it as taking one (an option name means
        the same on every command; tests/unit/test_cli_usage.py checks). ``args`` is left as
        it is when a root option (``--help``, ``--version``…) or ``--`` comes first, when no
        word follows the options, and for a group (``rotate lab``), whose options belong to
        its own commands."""
        root = {name for param in self.get_params(ctx)
                for name in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ()))}
        valued, flags = self.command_options(ctx)
        index = 0
        while index < len(args):
            token = args[index]
            if token == "--" or token.split("=", 1)[0] in root:
                return args
            if not token.startswith("-") or token == "-":
                break
            index += 1
            if "=" not in token and token in valued:
                index += 1
        if index == 0:
            return args
        if index >= len(args):
            if args[0].split("=", 1)[0] in valued | flags and not ctx.resilient_parsing:
                raise ClickUsageError(f"{args[0].split('=', 1)[0]} is an option of a command: "
                                      "name the CREDENTIAL or COMMAND too (before or after "
                                      "the options)", ctx)
            return args
        word = args[index]
        if isinstance(self.commands.get(word), TyperGroup):
            return args
        return [word, *args[:index], *args[index + 1:]]

    def command_options(self, ctx: Any) -> tuple[set[str], set[str]]:
        """The option names of the commands (not the groups): those that take a value
        (``--chain``, ``-o``…), and the flags (``--confirm``…)."""
        valued: set[str] = set()
        flags: set[str] = set()
        for command in self.commands.values():
            if isinstance(command, TyperGroup):
                continue
            for param in command.get_params(ctx):
                if getattr(param, "param_type_name", "") != "option":
                    continue
                flag = getattr(param, "is_flag", False) or getattr(param, "count", False)
                (flags if flag else valued).update((*param.opts, *param.secondary_opts))
        return valued, flags

    def resolve_command(
        self, ctx: Any, args: list[str],
    ) -> tuple[str | None, Any, list[str]]:
        ctx.meta[ARGV_KEY] = list(args)
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            return CREDENTIAL_COMMAND, self.commands[CREDENTIAL_COMMAND], args
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        previous_hook = threading.excepthook
        threading.excepthook = _report_thread_bug
        try:
            return super().invoke(ctx)
        except ClickUsageError as exc:
            if "unexpected extra argument" in exc.message:
                # The stray word may be a value typed where it never belongs: don't echo it.
                exc.message = ("unexpected extra argument (not shown: a new value is never "
                               "passed in argv; use --value-stdin)")
            _report_usage_json(ctx, exc)
            raise
        except (typer.Exit, typer.Abort, typer.TyperException, KeyboardInterrupt,
                BrokenPipeError):  # typer exits 1 quietly on a closed pipe (`| head`)
            raise
        except RotateError as exc:
            if isinstance(exc, ChainFileError):  # a chain file that is not there: say so
                exc = missing_chain(ctx.meta) or exc
            _report_error(ctx, exc)
            raise typer.Exit(exc.exit_code) from None
        except Exception as exc:
            _report_bug(ctx, exc)
            raise typer.Exit(EXIT_INTERNAL) from None
        finally:
            threading.excepthook = previous_hook


def _console(ctx: Any) -> Console:
    console = ctx.meta.get(CONSOLE_KEY)
    return console if isinstance(console, Console) else Console("text")


def _report_error(ctx: Any, exc: RotateError) -> None:
    """The error's message (safe by contract) on stderr; under ``-o json`` also one JSON
    error document on stdout, unless the command already wrote its one document."""
    console = _console(ctx)
    console.error(exc.message, exc.hint)
    _error_document(console, {"kind": "error", "error": type(exc).__name__,
                               "exit_code": exc.exit_code, "message": exc.message})


def _error_document(console: Console, document: dict[str, Any]) -> None:
    """The error as the invocation's one document, unless the command already wrote one
    (stdout under ``-o json``; the ``--report-file`` in every mode)."""
    if console.json_mode and console.json_written:
        return
    console.document(document)


def _wanted_document(argv: list[str]) -> str:
    """"json" or "yaml" when argv asks for a document (``-o json``, ``--output=yaml``…),
    else ""."""
    pairs = zip(argv, [*argv[1:], ""], strict=True)
    for a, b in pairs:
        for kind in ("json", "yaml"):
            if (a in ("-o", "--output") and b.lower() == kind) \
                    or a.lower() in (f"-o{kind}", f"--output={kind}"):
                return kind
    return ""


def _report_usage_json(ctx: Any, exc: Any) -> None:
    """Under ``-o json`` (``-o yaml``) a usage error still yields one document on stdout;
    click prints the usage and the message on stderr as usual."""
    console = _console(ctx)
    document = {"kind": "error", "error": "UsageError", "exit_code": EXIT_USAGE,
                "message": exc.format_message()}
    argv = ctx.meta.get(ARGV_KEY, [])
    if console.json_mode or console.report_file is not None:
        _error_document(console, document)
    elif (wanted := _wanted_document(argv)) and not (wanted == "yaml" and argv[:1] == ["rbac"]):
        Console(wanted).json(document)  # (rbac's YAML is manifests, for kubectl apply)


def _report_bug(ctx: Any, exc: BaseException) -> None:
    console = _console(ctx)
    if os.environ.get("ROTATE_DEBUG") == "1":
        sys.stderr.write("".join(traceback.format_exception(exc)))
    console.error(f"internal error (a bug): {type(exc).__module__}.{type(exc).__qualname__}",
                  "run again with ROTATE_DEBUG=1 for the traceback, and report it")
    _error_document(console, {"kind": "error", "error": "internal",
                              "exit_code": EXIT_INTERNAL, "message": "internal error (a bug)"})


def _report_thread_bug(args: threading.ExceptHookArgs) -> None:
    """A background thread (lease renewal, a watch) died of an exception: Python would print
    its traceback — text and all — on stderr; like any bug, only its type is shown."""
    if args.exc_type is SystemExit:
        return
    if os.environ.get("ROTATE_DEBUG") == "1":
        sys.stderr.write("".join(traceback.format_exception(
            args.exc_type, args.exc_value, args.exc_traceback)))
    thread = args.thread.name if args.thread is not None else "?"
    sys.stderr.write(f"warning: background thread {thread} failed: internal error (a bug): "
                     f"{args.exc_type.__module__}.{args.exc_type.__qualname__}\n")


HELP = """Rotate a credential end to end: backend → ESO → provider → Config Center consumers.

\b
  rotate CREDENTIAL              plan: preflight + the ordered steps; changes nothing
  rotate CREDENTIAL --confirm    run the whole chain
  rotate CREDENTIAL --help       the rotation options (--chain, -o json, --value-stdin, ...)
"""

EPILOG = """\b
Exit codes: 0 ok or plan passed, 1 bug, 2 usage or invalid chain file, 3 preflight failed,
4 locked, 10-16 stage failed (backend, sync, provider, config, token, consumer, readyz),
17 the backend moved on during the run, 18 a rollback's restore refused by the provider,
20 status: the chain is not closed, 21 due --exit-code: something is due,
130 interrupted (resumable)."""

app = typer.Typer(
    name="rotate",
    cls=RotateGroup,
    help=HELP,
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    subcommand_metavar="CREDENTIAL [OPTIONS] | COMMAND [ARGS]...",
    options_metavar="",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


def installed_version() -> str:
    """The installed distribution's version (what pip/pipx installed), else the source's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rotate")
    except PackageNotFoundError:
        from rotate import __version__

        return __version__


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"rotate {installed_version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print the version and exit.")] = False,
) -> None:
    pass


#: the commands' usage line: ``Usage: rotate list [OPTIONS]`` (the root's own options_metavar
#: is "" — its usage line is the subcommand metavar — and typer hands it down to every command
#: that does not name its own, which left ``rotate list --help`` an empty usage line)
OPTIONS = "[OPTIONS]"

app.command(CREDENTIAL_COMMAND, hidden=True, cls=CredentialCommand,
            context_settings={"allow_extra_args": True})(rotate_cmd.rotate)
for _name, _function in (("list", list_cmd.list_credentials), ("runs", runs.runs),
                         ("show", show.show), ("resume", resume.resume),
                         ("rollback", rollback.rollback), ("doctor", doctor.doctor),
                         ("status", status.status), ("due", due.due), ("watch", watch.watch),
                         ("rbac", rbac), ("vault-policy", vault_policy), ("init", init)):
    app.command(_name, cls=LightCommand, options_metavar=OPTIONS)(_function)
app.add_typer(lab_app, name="lab")


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point. Returns (via SystemExit) the cli.md exit code."""
    command = typer.main.get_command(app)
    try:
        command.main(args=argv, prog_name="rotate", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_USAGE)
    return 0


def console() -> NoReturn:
    """The ``rotate`` console script (and ``python -m rotate``): :func:`main`, then the
    process ends at once with its exit code.

    Why not a plain ``sys.exit``: by the time ``main`` returns, rotate has closed every file
    it wrote (journal, report), joined the threads that matter (the Lease renewal; the event
    senders are drained or given up, rotate.engine.events) and the output is flushed here.
    What is left is the interpreter tearing down ~1,000 modules — the kubernetes client's
    models are most of them — which takes 0.2–0.4 s on an idle machine, more on a busy
    one, and does nothing for the user.  ``main`` stays an ordinary function for in-process
    callers (the tests); rotate registers no ``atexit`` handler (a test checks).  Under a
    profiler or tracer (``python -m cProfile``, coverage), whose results are written at exit,
    the process ends the ordinary way."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe or stream: nothing more can be said on it
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    console()

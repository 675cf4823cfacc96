"""``rotate init [--chain FILE|-] [--force]`` — draft a first chain file from a live cluster.

Reads the cluster of the kubeconfig (as kubectl) and, when ``CONFIG_CENTER_URL`` is set,
the Config Center (rotate.engine.drafting); writes the chain file where every other command
reads it (``--chain``, ``ROTATE_CHAIN``, ``./rotate.yaml``) with the services' JSON Schemas
in ``schemas/`` beside it, or prints it with ``--chain -``.  Refuses to overwrite anything
without ``--force``.  Only reads the cluster; never prints or writes a Secret's value.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from rotate.cli.console import console_for
from rotate.cli.options import DEFAULT_CHAIN, Kubeconfig, KubeContext

STDOUT = Path("-")

Target = Annotated[Path, typer.Option(
    "--chain", envvar="ROTATE_CHAIN", metavar="FILE", show_envvar=False,
    help="The chain file to write (env ROTATE_CHAIN); - prints it instead.")]
Force = Annotated[bool, typer.Option(
    "--force", help="Overwrite the chain file and schema files if they exist.")]


def init(
    ctx: typer.Context,
    chain: Target = DEFAULT_CHAIN,
    force: Force = False,
    context: KubeContext = None,
    kubeconfig: Kubeconfig = None,
) -> None:
    """Draft a chain file from the cluster (and the Config Center): review its guesses."""
    console = console_for(ctx)
    from rotate.engine.drafting.draft import ConfigCenterNames
    from rotate.engine.drafting.files import init_chain, real_sources

    names = ConfigCenterNames()
    kube, config_center = real_sources(os.environ, context=context, kubeconfig=kubeconfig,
                                       names=names)
    target = None if chain == STDOUT else chain
    result = init_chain(kube, config_center, target, force=force, names=names)
    data = result.draft.data
    summary = (f"{len(data.get('credentials', {}))} credential(s), "
               f"{len(data.get('services', {}))} service(s), "
               f"{len(result.draft.guesses)} guess(es) to review")
    if target is None:
        sys.stdout.write(result.text)
        sys.stdout.flush()
        console.note(f"drafted {summary}; schemas not written (stdout)")
        return
    for path in result.written[:-1]:
        console.note(f"wrote {path}")
    console.note(f"wrote {target}: {summary}")
    for note in result.draft.notes:
        console.note(f"not drafted: {note}")
    console.note(f"next: grep -n 'guess:' {target}; rotate doctor --chain {target}")

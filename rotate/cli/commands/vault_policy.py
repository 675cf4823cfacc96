"""``rotate vault-policy [CREDENTIAL]...`` — the OpenBao/Vault policy a rotation needs.

Prints HCL granting exactly the capabilities ``doctor`` and preflight check
(:mod:`rotate.engine.access`): on each credential's KV v2 data and metadata paths
``create`` (the path may be new), ``read`` and ``update``, and ``update`` on
``sys/capabilities-self``.  Load it with ``rotate vault-policy | bao policy write rotate -``.
Reads the chain file only.
"""

from __future__ import annotations

import typer

from rotate.cli.commands.rbac import Credentials, selected
from rotate.cli.options import DEFAULT_CHAIN, Chain


def vault_policy(
    ctx: typer.Context,
    credentials: Credentials = None,
    chain: Chain = DEFAULT_CHAIN,
) -> None:
    """OpenBao/Vault policy (HCL) for a rotation."""
    loaded, creds = selected(ctx, chain, credentials)
    from rotate.engine.grants import vault_policy as render

    typer.echo(render(loaded, creds), nl=False)

"""``rotate rbac [CREDENTIAL]... -o yaml|json`` — the Kubernetes RBAC a rotation needs.

Prints a ServiceAccount, a Role + RoleBinding per namespace and a ClusterRole +
ClusterRoleBinding for the cluster-scoped permissions, granting exactly what ``doctor`` and
preflight check (:mod:`rotate.engine.access`), for the named credentials (all when none is
named).  Apply it with ``rotate rbac | kubectl apply -f -``.  Reads the chain file only.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rotate.cli.console import console_for
from rotate.cli.options import DEFAULT_CHAIN, Chain, existing_chain, state_dir_or_default
from rotate.cli.state import state_of
from rotate.cli.yaml_text import to_yaml
from rotate.engine.options import Options

if TYPE_CHECKING:
    from rotate.chain import model as chain_model

DEFAULT_SERVICE_ACCOUNT = "rotate-system/rotate"
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class ManifestFormat(StrEnum):
    yaml = "yaml"
    json = "json"


def _service_account(text: str) -> tuple[str, str]:
    namespace, sep, name = text.partition("/")
    if not sep or not _LABEL.match(namespace) or not _NAME.match(name):
        raise typer.BadParameter("expected NAMESPACE/NAME (lowercase RFC 1123 names), "
                                 f"e.g. {DEFAULT_SERVICE_ACCOUNT}",
                                 param_hint="'--service-account'")
    return namespace, name


Credentials = Annotated[list[str] | None, typer.Argument(
    metavar="CREDENTIAL", show_default=False,
    help="Credentials whose rotation the grants cover [default: all in the chain file].")]
ServiceAccount = Annotated[str, typer.Option(
    "--service-account", metavar="NS/NAME", help="The ServiceAccount rotate runs as.")]
ManifestOutput = Annotated[ManifestFormat, typer.Option(
    "-o", "--output", case_sensitive=False,
    help="yaml: one document per object; json: one v1 List.")]


def selected(ctx: typer.Context, chain_file: Path,
             names: list[str] | None) -> tuple[chain_model.Chain, list[chain_model.Credential]]:
    """The loaded chain and the named credentials (all of them when none is named)."""
    engine = state_of(ctx).engine()
    chain = engine.load_chain(Options(chain_file=existing_chain(ctx, chain_file),
                                      state_dir=state_dir_or_default(None)))
    wanted = list(dict.fromkeys(names or chain.credentials))
    return chain, [chain.credential(name) for name in wanted]


def rbac(
    ctx: typer.Context,
    credentials: Credentials = None,
    chain: Chain = DEFAULT_CHAIN,
    output: ManifestOutput = ManifestFormat.yaml,
    service_account: ServiceAccount = DEFAULT_SERVICE_ACCOUNT,
    watch: Annotated[bool, typer.Option(
        "--watch", help="Add what `rotate watch` needs: list/watch on Secrets in the target "
                        "namespaces, the leader Lease rotate-watch.")] = False,
) -> None:
    """Kubernetes RBAC for a rotation: ServiceAccount, Roles, bindings."""
    namespace, name = _service_account(service_account)
    # -o yaml is the manifests, for `kubectl apply -f -`: an error is never a YAML document
    console = console_for(ctx, "json" if output is ManifestFormat.json else "text")
    loaded, creds = selected(ctx, chain, credentials)
    from rotate.engine.grants import ServiceAccountRef, rbac_objects

    objects = rbac_objects(loaded, creds, ServiceAccountRef(namespace, name), watch=watch)
    if output is ManifestFormat.json:
        console.json({"apiVersion": "v1", "kind": "List", "items": objects})
        return
    typer.echo(to_yaml(objects), nl=False)

"""A service's values as a graph: JSON Pointers, the order templates resolve in, and — derived
from it, never listed in the file (chain.md) — which services consume a credential.

Pure functions of the chain model.  They assume the loader's invariants (no template cycle,
every reference names a value of the same document); a reference to an unknown pointer is
ignored rather than raised, so they never fail on a loaded chain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rotate.chain.model import (
    Chain,
    SecretKeyRef,
    SecretKeySource,
    TemplateSource,
    ValueSource,
)


def pointer_tokens(pointer: str) -> list[str]:
    """``/a~1b/c`` → ``["a/b", "c"]`` (RFC 6901 unescaping: ~1 before ~0)."""
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def resolution_order(values: Mapping[str, ValueSource]) -> list[str]:
    """The pointers of ``values`` ordered so that every template comes after what it references.

    File order is kept wherever dependencies allow. Assumes the loader's invariants (no
    cycles, references exist); a reference to an unknown pointer is ignored here.
    """
    order: list[str] = []
    done: set[str] = set()

    def visit(pointer: str, stack: tuple[str, ...]) -> None:
        if pointer in done or pointer in stack or pointer not in values:
            return
        source = values[pointer]
        if isinstance(source, TemplateSource):
            for ref in source.refs:
                visit(ref, (*stack, pointer))
        done.add(pointer)
        order.append(pointer)

    for pointer in values:
        visit(pointer, ())
    return order


def derives_from(values: Mapping[str, ValueSource], pointer: str,
                 matches: Callable[[SecretKeySource], bool]) -> bool:
    """Whether the value at ``pointer`` comes from a Secret key ``matches`` accepts, directly
    or through templates (transitively; a template cycle ends the walk, it is no match)."""
    seen: set[str] = set()
    todo = [pointer]
    while todo:
        p = todo.pop()
        if p in seen or p not in values:
            continue
        seen.add(p)
        source = values[p]
        if isinstance(source, SecretKeySource) and matches(source):
            return True
        if isinstance(source, TemplateSource):
            todo.extend(source.refs)
    return False


def depends_on_secret(
    values: Mapping[str, ValueSource], pointer: str, target: SecretKeyRef
) -> bool:
    """Whether the value at ``pointer`` comes from ``target``'s key, directly or through
    templates."""
    return derives_from(values, pointer, lambda source: source.secret == target)


def consumers_of(chain: Chain, credential_name: str) -> tuple[str, ...]:
    """Services whose document is sourced (directly or through a template, transitively)
    from the credential's target Secret key; in file order. Derived, never listed (chain.md).
    """
    target = chain.credential(credential_name).secret
    return tuple(
        name
        for name, service in chain.services.items()
        if any(depends_on_secret(service.values, p, target) for p in service.values)
    )


def credentials_consumed_by(chain: Chain, service_name: str) -> tuple[str, ...]:
    """The inverse of :func:`consumers_of`: credentials a service depends on, in file order."""
    service = chain.services[service_name]
    return tuple(
        name
        for name, cred in chain.credentials.items()
        if any(depends_on_secret(service.values, p, cred.secret) for p in service.values)
    )

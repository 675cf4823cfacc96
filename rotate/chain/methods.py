"""What the chain file knows of a provider ``apply:`` method: :class:`MethodSpec`, and the
registry of specs by name — the built-ins and those of installed plug-ins (docs/providers.md).

A method is declared once, by one value, wherever it comes from: its name, its wire protocol,
its defaults, the JSON Schema of its own fields under the provider entry (merged into the
chain file's validation, so its problems carry line numbers like every other field), whether
one account holds two values, what it needs in ``rotate rbac``/``vault-policy``, and the
factory of its :class:`~rotate.providers.method.ProviderMethod` (a callable, or
``"module:attr"`` imported only when a run needs the object).  The built-ins are registered
through :func:`register_method` like any plug-in.

Plug-ins are entry points of the group ``rotate.providers`` (name = the ``apply:`` value,
object = a :class:`MethodSpec`).  They are looked up only when a chain names a method that is
not registered: ``rotate --help`` and a chain of built-ins never read the installed
distributions' metadata.  A name nothing provides, and a plug-in that fails to load, are
:class:`MethodUnavailable` — worded for the operator, never with the plug-in's exception text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

#: The entry point group a plug-in distribution declares its methods in.
ENTRY_POINT_GROUP = "rotate.providers"
#: How a provider entry is restarted only (not a method object; never a plug-in name).
ROLLOUT = "rollout"

Problem = tuple[list[str | int], str]


@dataclass(frozen=True)
class KubeAccess:
    """One Kubernetes permission a method needs beyond rotate's own (``rotate rbac``)."""

    verb: str
    kind: str
    namespace: str | None
    name: str | None = None
    subresource: str | None = None  # "log" of Pod: pods/log


@dataclass(frozen=True)
class VaultAccess:
    """One OpenBao/Vault path a method needs beyond the credential's (``vault-policy``)."""

    path: str
    capabilities: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class MethodSpec:
    """One ``apply:`` method as the chain file, the plan and the grants see it.

    ``connects``: rotate opens the provider's wire ``protocol`` itself (its Service, an
    admin login, ``probe``); a method that does not (``apply: job``: a Job in the cluster
    changes the value) declares no protocol, port or admin, and its entries get no
    connection.  ``fields``: JSON Schema (draft 2020-12) of each field the method adds under
    its provider entry, validated only on entries of this method (and on ``apply: rollout``
    entries whose ``probe`` is this method's protocol).  ``holds_two_values``: one account
    takes the new value while the old one still works (an ACL user's several passwords);
    otherwise, ``alternating_users`` lets ``users: [a, b]`` hold the two values on two
    accounts.  Either makes ``overlap`` the default strategy.  ``problems(entry)`` yields the
    method's own semantic problems as (path below the entry, reason).  ``access(applied)``
    names what the method needs beyond rotate's usual grants (``applied`` is its ProviderApply).
    """

    name: str
    _: KW_ONLY
    factory: str | Callable[[], Any]
    #: False: the method reaches the provider itself (``apply: job``'s rotator Job); its
    #: entries have no connection, no admin and no probe, and it declares none of these
    connects: bool = True
    protocol: str | None = None
    default_port: int | None = None
    default_admin_user: str | None = None
    package: str = "rotate"
    default_user: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict, hash=False)
    holds_two_values: bool = False
    alternating_users: bool = False
    #: why overlap needs ``users`` (alternating methods) — the strategy rule's wording
    one_value: str = "an account holds one password at a time"
    problems: Callable[[Mapping[str, Any]], Iterator[Problem]] | None = None
    access: Callable[[Any], Sequence[KubeAccess | VaultAccess]] | None = None

    def __post_init__(self) -> None:
        wire = {"protocol": self.protocol, "default_port": self.default_port,
                "default_admin_user": self.default_admin_user,
                "default_user": self.default_user}
        if self.connects:
            missing = [k for k, v in wire.items() if v is None and k != "default_user"]
            if missing:
                raise ValueError(f"method {self.name!r} connects: it needs {', '.join(missing)}")
        else:
            given = [k for k, v in wire.items() if v is not None]
            if given or self.alternating_users:
                raise ValueError(f"method {self.name!r} does not connect: it takes no "
                                 f"{', '.join(given) or 'alternating_users'}")

    @property
    def builtin(self) -> bool:
        return self.package == "rotate"

    @property
    def label(self) -> str:
        """How messages name the method's providers: its protocol, else ``apply: name``."""
        return self.protocol if self.protocol is not None else f"apply: {self.name}"


class MethodUnavailable(Exception):
    """``apply: name`` cannot be used: nothing provides it, or its plug-in failed to load.
    The text names the method, the package and what to do; never the plug-in's own error."""


_SPECS: dict[str, MethodSpec] = {}
_MISSING: set[str] = set()  # looked up already: no entry point of that name


def register_method(spec: MethodSpec, *, replace: bool = False) -> None:
    """Make ``apply: spec.name`` available.  A taken name is refused unless ``replace`` (a
    plug-in cannot silently take over a built-in method); ``rollout`` is never a method."""
    if spec.name == ROLLOUT:
        raise ValueError("rollout is not a method name")
    if spec.name in _SPECS and not replace:
        raise ValueError(f"provider method {spec.name!r} is registered already")
    _SPECS[spec.name] = spec
    _MISSING.discard(spec.name)


def unregister_method(name: str) -> None:
    _SPECS.pop(name, None)


def registered() -> tuple[MethodSpec, ...]:
    """The specs known now (built-ins first, then plug-ins in the order they were loaded)."""
    return tuple(_SPECS.values())


def spec_of(name: str) -> MethodSpec:
    """The spec of ``apply: name``: registered, or from an installed plug-in (loaded now);
    MethodUnavailable otherwise."""
    spec = _SPECS.get(name)
    if spec is None:
        spec = _load_plugin(name)
    return spec


def registered_spec(name: str) -> MethodSpec | None:
    """The spec registered under ``name`` now; never loads a plug-in."""
    return _SPECS.get(name)


def find_spec(name: str) -> MethodSpec | None:
    """:func:`spec_of`, or None when the method is unavailable for any reason."""
    try:
        return spec_of(name)
    except MethodUnavailable:
        return None


def spec_for_protocol(protocol: str) -> MethodSpec | None:
    """The first registered method speaking wire ``protocol`` (a rollout provider's probe)."""
    for spec in _SPECS.values():
        if spec.protocol == protocol:
            return spec
    _load_all_plugins()
    return next((s for s in _SPECS.values() if s.protocol == protocol), None)


def protocols() -> tuple[str, ...]:
    return tuple(dict.fromkeys(s.protocol for s in _SPECS.values() if s.protocol is not None))


def suggested_package(name: str) -> str:
    return f"rotate-provider-{name}"


def _entry_points(name: str | None = None) -> list[Any]:
    from importlib.metadata import entry_points  # here: only a chain naming a plug-in pays

    found = entry_points(group=ENTRY_POINT_GROUP)
    return [ep for ep in found if name is None or ep.name == name]


def _load_plugin(name: str) -> MethodSpec:
    if name in _MISSING:
        raise MethodUnavailable(_not_provided(name))
    candidates = _entry_points(name)
    if not candidates:
        _MISSING.add(name)
        raise MethodUnavailable(_not_provided(name))
    ep = candidates[0]
    package = ep.dist.name if getattr(ep, "dist", None) is not None else suggested_package(name)
    try:
        spec = ep.load()
    except Exception as exc:  # a plug-in's import may raise anything; its text is not shown
        raise MethodUnavailable(
            f"apply: {name}: the plug-in {package} failed to load ({type(exc).__name__}); "
            f"nothing was changed; reinstall or fix it: pip install --force-reinstall "
            f"{package}") from None
    if not isinstance(spec, MethodSpec) or spec.name != name:
        raise MethodUnavailable(
            f"apply: {name}: the plug-in {package} does not declare a MethodSpec named "
            f"{name!r} (entry point {ENTRY_POINT_GROUP}:{name}); nothing was changed; "
            f"upgrade it: pip install --upgrade {package}")
    if spec.builtin:
        spec = _with_package(spec, package)
    register_method(spec)
    return spec


def _with_package(spec: MethodSpec, package: str) -> MethodSpec:
    from dataclasses import replace

    return replace(spec, package=package)


def _load_all_plugins() -> None:
    for ep in _entry_points():
        if ep.name not in _SPECS:
            try:
                _load_plugin(ep.name)
            except MethodUnavailable:
                continue


def _not_provided(name: str) -> str:
    return (f"apply: {name} is not a built-in method and no installed package provides it; "
            f"install the package that provides it, e.g. pip install "
            f"{suggested_package(name)}")


# --------------------------------------------------------------------------- built-ins


def _register_builtins() -> None:
    register_method(MethodSpec(
        name="redis-acl", protocol="redis",
        factory="rotate.providers.redis_acl:RedisAclMethod",
        default_port=6379, default_admin_user="default", default_user="default",
        fields={"tls": {"type": "boolean"}},
        holds_two_values=True))
    register_method(MethodSpec(
        name="postgres", protocol="postgres",
        factory="rotate.providers.postgres_roles:PostgresRolesMethod",
        default_port=5432, default_admin_user="postgres",
        fields={"database": {"type": "string", "minLength": 1, "maxLength": 63},
                "sslmode": {"enum": ["disable", "allow", "prefer", "require", "verify-ca",
                                     "verify-full"]}},
        alternating_users=True,
        one_value="a PostgreSQL role holds one password at a time"))
    register_method(MethodSpec(
        name="job", connects=False,
        factory="rotate.providers.job:JobMethod",
        fields={"job": JOB_FIELD},
        one_value="the rotator Job sets one value",
        problems=_job_problems, access=_job_access))


#: ``apply: job``: the custom rotator's container, run once per phase (set, test, finish) with
#: the old and new values mounted from a Secret rotate creates per run and phase; no value in
#: env or args (``env`` takes plain name/value pairs: no ``valueFrom``).
JOB_FIELD: Mapping[str, Any] = {
    "description": "apply: job: the custom rotator's container, run once per phase (set, "
                   "test, finish) with the old and new values mounted from a Secret rotate "
                   "creates per run and phase; no value in env or args.",
    "type": "object",
    "additionalProperties": False,
    "required": ["image", "command"],
    "properties": {
        "image": {"type": "string", "minLength": 1},
        "command": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        "args": {"type": "array", "items": {"type": "string"}},
        "env": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["name", "value"],
            "properties": {"name": {"$ref": "#/$defs/envName"},
                           "value": {"type": "string"}}}},
        "serviceAccountName": {"$ref": "#/$defs/k8sName"},
        "deadline": {"$ref": "#/$defs/duration"},
        "twoValues": {"type": "boolean", "description": "the rotator keeps the old value "
                      "working until finish: overlap is allowed (and the default)"},
    },
}


def _job_access(applied: Any) -> list[KubeAccess | VaultAccess]:
    """The phases' Jobs and values Secrets, the rotator pod's log, its ServiceAccount."""
    ns, job = applied.provider.namespace, applied.job
    out: list[KubeAccess | VaultAccess] = [
        KubeAccess(v, kind, ns) for kind in ("Job", "Secret") for v in ("create", "get",
                                                                      "delete")]
    out += [KubeAccess("list", "Pod", ns), KubeAccess("get", "Pod", ns, subresource="log")]
    if job is not None and job.service_account:
        out.append(KubeAccess("get", "ServiceAccount", ns, name=job.service_account))
    return out


def _job_problems(entry: Mapping[str, Any]) -> Iterator[Problem]:
    if "job" not in entry:
        yield [], "apply: job needs job (image, command: the custom rotator's container)"


_register_builtins()

"""``apply: job`` in the chain file: the rotator's container is built with its defaults;
a job without its container, connection fields on a job provider, ``job`` on another method
and an env entry that reads a Secret (``valueFrom``) are refused with their line (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rotate.chain.loader import load_chain
from rotate.chain.methods import MethodSpec, spec_of
from rotate.chain.model import AdminAuth, Chain, JobTemplate
from rotate.chain.strategy_rules import default_strategy
from rotate.core.errors import EXIT_USAGE, ChainFileError
from rotate.core.refs import ObjectRef

HEAD = """\
apiVersion: rotate/v1
kind: Chain
backend: {kvMount: secret, auth: {method: token}}
cluster: {lockNamespace: rotate-system}
configCenter: {urlEnv: CONFIG_CENTER_URL, tokenEnv: CONFIG_CENTER_TOKEN}
credentials:
  bugsink-admin:
    backend: {path: infra/bugsink, key: password}
    generate: {length: 32}
    externalSecret: {namespace: bugsink, name: bugsink-admin}
    secret: {namespace: bugsink, name: bugsink-admin-secret, key: password}
    providers:
      - kind: Deployment
        namespace: bugsink
        name: bugsink
"""


def load(tmp_path: Path, provider: str) -> Chain:
    path = tmp_path / "rotate.yaml"
    path.write_text(HEAD + provider)
    return load_chain(path)


def problems(tmp_path: Path, provider: str) -> str:
    with pytest.raises(ChainFileError) as info:
        load(tmp_path, provider)
    assert info.value.exit_code == EXIT_USAGE
    return "\n".join(str(p) for p in info.value.problems)


def test_a_job_provider_is_built_with_its_container_and_no_connection(tmp_path: Path) -> None:
    cred = load(tmp_path, """\
        apply: job
        job:
          image: bugsink-rotator:1
          command: [python, -m, rotator]
          env: [{name: BUGSINK_URL, value: "http://bugsink:8000"}]
          serviceAccountName: bugsink-rotator
          deadline: 45s
""").credential("bugsink-admin")
    applied = cred.apply_of(ObjectRef("Deployment", "bugsink", "bugsink"))
    assert applied.live and applied.connection is None
    assert applied.admin == AdminAuth("")
    assert applied.job == JobTemplate("bugsink-rotator:1", ("python", "-m", "rotator"),
                                      env=(("BUGSINK_URL", "http://bugsink:8000"),),
                                      service_account="bugsink-rotator", deadline=45.0)


def test_apply_job_without_its_container_is_refused(tmp_path: Path) -> None:
    assert "apply: job needs job" in problems(tmp_path, "        apply: job\n")


def test_connection_fields_are_not_fields_of_a_job(tmp_path: Path) -> None:
    text = problems(tmp_path, """\
        apply: job
        user: admin
        job: {image: r:1, command: [r]}
""")
    assert "user is not a field of apply: job" in text


def test_job_on_another_method_is_refused(tmp_path: Path) -> None:
    assert "job is for apply: job" in problems(tmp_path, """\
        job: {image: r:1, command: [r]}
""")


def test_an_env_entry_reading_a_secret_is_refused(tmp_path: Path) -> None:
    text = problems(tmp_path, """\
        apply: job
        job:
          image: r:1
          command: [r]
          env:
            - name: PASSWORD
              valueFrom: {secretKeyRef: {name: bugsink-admin-secret, key: password}}
""")
    assert "/job/env/0" in text


def test_a_job_holds_one_value_so_restart_is_its_default_and_overlap_refused(
        tmp_path: Path) -> None:
    cred = load(tmp_path, """\
        apply: job
        job: {image: r:1, command: [r]}
""").credential("bugsink-admin")
    strategy, why = default_strategy(cred)
    assert strategy == "restart" and "one value" in why
    assert "apply: job: the method holds one value" in problems(tmp_path, """\
        apply: job
        job: {image: r:1, command: [r]}
    strategy: overlap
""")


def test_a_rotator_declaring_two_values_defaults_to_overlap(tmp_path: Path) -> None:
    cred = load(tmp_path, """\
        apply: job
        job: {image: r:1, command: [r], twoValues: true}
""").credential("bugsink-admin")
    assert cred.apply_of(ObjectRef("Deployment", "bugsink", "bugsink")).job.two_values
    assert default_strategy(cred)[0] == "overlap"


def test_a_method_that_connects_must_declare_its_protocol_and_one_that_does_not_none() -> None:
    with pytest.raises(ValueError, match="needs protocol, default_port, default_admin_user"):
        MethodSpec("m", factory="x:y")
    with pytest.raises(ValueError, match="takes no protocol"):
        MethodSpec("m", factory="x:y", connects=False, protocol="redis")
    assert spec_of("job").connects is False and spec_of("job").protocol is None
    assert "job" in spec_of("job").fields  # its template is the spec's schema fragment

"""Image → program: what local process plays a container's image on the lab's node.

- An image containing ``dragonfly`` or ``redis`` runs ``redis-server -`` fed its
  configuration on *stdin* (:func:`~rotate_lab.cluster.node.containers.redis_config`): the
  container's flags become config lines, so a ``--requirepass`` never reaches
  ``/proc/<pid>/cmdline``.
- ``shop-service`` runs the sample service module (:mod:`rotate_lab.shop.sample_service`);
  its ``DRAGONFLY_PASSWORD_FILE`` is a container path, translated like ``PGDATA``.
- ``postgres`` runs the official image's entrypoint
  (:mod:`rotate_lab.systems.postgres_entrypoint`) against Debian's binaries
  (:func:`rotate_lab.systems.postgres.bindir`).  ``PGDATA`` (default :data:`IMAGE_PGDATA`)
  and the init scripts' directory (:data:`IMAGE_INITDB_DIR`) are container paths,
  translated through the container's volume mounts to host directories
  (:func:`host_path`); with no volume at ``PGDATA`` the data lives in the pod directory, as
  in a container's own filesystem.  In a root lab, whose PostgreSQL runs as another user
  that may not reach the lab directory, the volume and the socket directory move to the
  same place under the lab's runtime directory (:func:`relocated`,
  :mod:`rotate_lab.host.runtime_dir`); the init scripts stay, the entrypoint reads them
  as root.
- ``mariadb`` runs the official image's entrypoint
  (:mod:`rotate_lab.systems.mariadb_entrypoint`) against Debian's ``mariadbd``; the volume
  at ``/var/lib/mysql`` is translated to its host directory (``rotate lab up --with
  mariadb``).
- ``bugsink/bugsink`` runs the real Bugsink server from its own venv, and
  ``rotate-lab/bugsink-rotator`` the custom rotator of ``apply: job``
  (:mod:`rotate_lab.systems.bugsink`; ``rotate lab up --with bugsink``).
- ``stakater/reloader`` runs ``sleep`` (a stand-in: the lab's Reloader runs in the cluster
  process).

Any other image is an :class:`~rotate_lab.cluster.node.containers.UnknownImage`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rotate_lab.cluster.node import bugsink_images
from rotate_lab.cluster.node.containers import (
    Launch,
    UnknownImage,
    expand,
    first_port,
    host_path,
    redis_config,
)
from rotate_lab.systems import mariadb, postgres

Obj = dict[str, Any]

#: the image's defaults: where PGDATA and the init scripts live inside the container
IMAGE_PGDATA = "/var/lib/postgresql/data"
IMAGE_INITDB_DIR = "/docker-entrypoint-initdb.d"


def is_postgres_image(image: str) -> bool:
    name = image.lower().rsplit("/", 1)[-1]
    return name.split(":", 1)[0].split("@", 1)[0] == "postgres"


def relocated(path: Path, lab_dir: Path, runtime_dir: Path | None) -> Path:
    """``path`` at the same place under ``runtime_dir`` when it lies in ``lab_dir``
    (``DIR/pvc/db/data-postgres-0`` → ``RUNTIME/pvc/db/data-postgres-0``)."""
    if runtime_dir is None or not path.is_relative_to(lab_dir):
        return path
    return runtime_dir / path.relative_to(lab_dir)


def postgres_launch(container: Obj, env: dict[str, str], *, pod_ip: str, pod_dir: Path,
                    mounts: dict[str, Path], base_env: dict[str, str], args: list[str],
                    lab_dir: Path, runtime_dir: Path | None = None) -> Launch:
    """The official image's entrypoint as a local process: ``PGDATA`` and the
    ``/docker-entrypoint-initdb.d`` mount are translated to the host directories of the pod's
    volumes (the data and socket directories :func:`relocated` into ``runtime_dir`` when
    there is one); the server listens on the pod IP and the container's first port."""
    try:
        binaries = postgres.bindir()
    except postgres.NoPostgres as exc:
        raise UnknownImage(str(exc)) from None
    pgdata_in_image = env.get("PGDATA") or IMAGE_PGDATA
    # No volume at PGDATA: the container's own (ephemeral) filesystem, as in Docker.
    volume = next((host for path, host in mounts.items()
                   if host_path(pgdata_in_image, {path: host}) is not None), None)
    pgdata = host_path(pgdata_in_image, mounts) or pod_dir / "rootfs" / "pgdata"
    volume = volume or pgdata.parent
    pgdata, volume, socket_dir = (relocated(p, lab_dir, runtime_dir)
                                  for p in (pgdata, volume, pod_dir / "run"))
    initdb_dir = host_path(IMAGE_INITDB_DIR, mounts)
    full_env = {**base_env, **env,
                "PGDATA": str(pgdata), "LAB_PG_VOLUME": str(volume), "LAB_PG_BINDIR": str(binaries),
                "LAB_PG_SOCKET_DIR": str(socket_dir),
                "POD_IP": pod_ip, "PORT": str(first_port(container) or postgres.PORT)}
    if initdb_dir is not None:
        full_env["LAB_PG_INITDB_DIR"] = str(initdb_dir)
    return Launch([sys.executable, "-m", "rotate_lab.systems.postgres_entrypoint", *args],
                  full_env, None, f"postgres ({binaries.parent.name})")


def is_mariadb_image(image: str) -> bool:
    name = image.lower().rsplit("/", 1)[-1]
    return name.split(":", 1)[0].split("@", 1)[0] == "mariadb"


def mariadb_launch(container: Obj, env: dict[str, str], *, pod_ip: str, pod_dir: Path,
                   mounts: dict[str, Path], base_env: dict[str, str]) -> Launch:
    """The image's entrypoint as a local process: its data in the host directory of the
    volume at ``/var/lib/mysql`` (else the pod directory), listening on the pod IP."""
    try:
        server, install_db = mariadb.binaries()
    except mariadb.NoMariaDb as exc:
        raise UnknownImage(str(exc)) from None
    volume = host_path(mariadb.DATA_PATH, mounts) or pod_dir / "rootfs" / "mysql"
    full_env = {**base_env, **env, "LAB_MARIADB_VOLUME": str(volume),
                "LAB_MARIADB_SOCKET": str(pod_dir / "run" / "mysqld.sock"),
                "LAB_MARIADBD": str(server), "LAB_MARIADB_INSTALL_DB": str(install_db),
                "POD_IP": pod_ip, "PORT": str(first_port(container) or mariadb.PORT)}
    return Launch([sys.executable, "-m", "rotate_lab.systems.mariadb_entrypoint"], full_env,
                  None, "mariadb")


def launch_for(container: Obj, env: dict[str, str], *, pod_ip: str, pod_dir: Path,
               service_name: str, lab_dir: Path, base_env: dict[str, str],
               mounts: dict[str, Path] | None = None,
               runtime_dir: Path | None = None) -> Launch:
    """Map the container's image to a local program; ``env`` is the resolved container env;
    ``runtime_dir``: a root lab's (:func:`postgres_launch`)."""
    image = str(container.get("image") or "")
    lowered = image.lower()
    command = [expand(str(c), env) for c in container.get("command") or []]
    args = [expand(str(a), env) for a in container.get("args") or []]
    full_env = {**base_env, **env}
    if is_postgres_image(image):
        return postgres_launch(container, env, pod_ip=pod_ip, pod_dir=pod_dir,
                               mounts=mounts or {}, base_env=base_env,
                               args=command + args, lab_dir=lab_dir, runtime_dir=runtime_dir)
    if is_mariadb_image(image):
        return mariadb_launch(container, env, pod_ip=pod_ip, pod_dir=pod_dir,
                              mounts=mounts or {}, base_env=base_env)
    if "dragonfly" in lowered or "redis" in lowered:
        flags = command[1:] + args
        conf, ignored = redis_config(flags, bind=pod_ip, default_port=first_port(container)
                                     or 6379, workdir=pod_dir)
        notes = [f"ignored flags without a redis equivalent: {', '.join(ignored)}"] \
            if ignored else []
        return Launch(["redis-server", "-"], full_env, conf.encode(), "redis-server", notes)
    if "shop-service" in lowered:
        port = first_port(container) or 8080
        full_env.update({
            "POD_IP": pod_ip, "PORT": str(port), "LAB_HOSTS_FILE": str(lab_dir / "hosts"),
            "LAB_FAULTS_FILE": str(lab_dir / "faults.json"), "LAB_SERVICE_NAME": service_name,
        })
        secret_file = full_env.get("DRAGONFLY_PASSWORD_FILE")  # a container path: the host's
        if secret_file:
            full_env["DRAGONFLY_PASSWORD_FILE"] = str(host_path(secret_file, mounts or {})
                                                      or secret_file)
        return Launch([sys.executable, "-m", "rotate_lab.shop.sample_service"], full_env,
                      None, "sample-service")
    if "bugsink-rotator" in lowered:
        return bugsink_images.rotator_launch(env, lab_dir=lab_dir, mounts=mounts or {},
                                      base_env=base_env)
    if "bugsink/bugsink" in lowered:
        return bugsink_images.server_launch(container, env, pod_ip=pod_ip, pod_dir=pod_dir,
                                     mounts=mounts or {}, base_env=base_env)
    if "stakater/reloader" in lowered:
        # Reloader's reconcile loop runs in the cluster process; its pod is a stand-in.
        return Launch(["sleep", "infinity"], full_env, None, "reloader-standin",
                      ["the lab's Reloader runs in the cluster process; this pod stands in"])
    raise UnknownImage(f'lab: no local program for image "{image}" (known: images '
                       'containing "dragonfly" or "redis", "postgres", "mariadb", "shop-service", '
                       '"bugsink/bugsink" and "bugsink-rotator")')

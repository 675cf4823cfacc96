"""The lab's Bugsink pod: the real Bugsink server (Django, gunicorn) on the pod's address,
its SQLite databases in the pod's data volume.

Run *as a file* by the interpreter of Bugsink's own venv (:mod:`rotate_lab.systems.bugsink`
finds it): Bugsink pins ``python-dateutil==2.9.*`` and rotate's ``kubernetes>=37`` needs
``>=3``, so the two cannot share one environment — this module imports nothing of rotate's.

Init-only, as the official image's ``CREATE_SUPERUSER``: the superuser is created from the
mounted Secret file only while the database has no user (its first start).  Every later
start — a rollout included — leaves the users alone, so a new value in the Secret changes
nothing: only the rotator Job (``apply: job``) changes the password.

Environment (set by the lab's kubelet): ``BUGSINK_DATA`` (host directory of the data
volume), ``POD_IP``, ``PORT``, ``CREATE_SUPERUSER_EMAIL``, ``CREATE_SUPERUSER_PASSWORD_FILE``
(the host path of the mounted Secret key).  The password is read from the file, never from
env or argv.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

CONF = '''\
from bugsink.settings.default import *  # noqa: F403
SECRET_KEY = {key!r}
DATABASES["default"]["NAME"] = {db!r}  # noqa: F405
DATABASES["snappea"]["NAME"] = {snappea!r}  # noqa: F405
SNAPPEA = {{"TASK_ALWAYS_EAGER": True}}
EMAIL_BACKEND = "bugsink.email_backends.QuietConsoleEmailBackend"
ALLOWED_HOSTS = ["*"]
BUGSINK = {{"BASE_URL": {base!r}, "SINGLE_USER": False, "PHONEHOME": False}}
'''


def configure(data: Path, base_url: str) -> None:
    """Write ``bugsink_conf.py`` into ``data`` (its secret key kept across starts) and make
    it Django's settings."""
    key_file = data / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(40))
        key_file.chmod(0o600)
    (data / "bugsink_conf.py").write_text(CONF.format(
        key=key_file.read_text().strip(), db=str(data / "db.sqlite3"),
        snappea=str(data / "snappea.sqlite3"), base=base_url))
    sys.path.insert(0, str(data))
    os.environ["DJANGO_SETTINGS_MODULE"] = "bugsink_conf"


def create_superuser_once(email: str, password_file: Path) -> str:
    """The superuser from the Secret file, only while no user exists (first start)."""
    from django.contrib.auth import get_user_model

    users = get_user_model()
    if users.objects.exists():
        return "superuser not created: the database has users already (init-only)"
    password = password_file.read_text().strip()
    users.objects.create_superuser(username=email, email=email, password=password)
    return f"superuser created: {email}"


def main() -> int:
    # Run as a file, its own directory is sys.path[0]: rotate_lab.systems.bugsink would
    # shadow Bugsink's own ``bugsink`` package.
    if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
        sys.path.pop(0)
    data = Path(os.environ["BUGSINK_DATA"])
    data.mkdir(parents=True, exist_ok=True)
    host, port = os.environ.get("POD_IP", "127.0.0.1"), os.environ.get("PORT", "8000")
    configure(data, f"http://{host}:{port}")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    call_command("migrate", database="snappea", verbosity=0)
    print(create_superuser_once(os.environ["CREATE_SUPERUSER_EMAIL"],
                                Path(os.environ["CREATE_SUPERUSER_PASSWORD_FILE"])), flush=True)
    argv = [sys.executable, "-m", "gunicorn", "--bind", f"{host}:{port}", "--workers", "1",
            "--pythonpath", str(data), "--control-socket", str(data / "gunicorn.ctl"),
            "--access-logfile", "-",
            "bugsink.wsgi"]
    os.execv(sys.executable, argv)


if __name__ == "__main__":
    sys.exit(main())

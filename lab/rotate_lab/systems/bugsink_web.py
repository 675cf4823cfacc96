"""Bugsink's own web pages, spoken over HTTP as a browser would: the login form, the
change-password form, the team pages.  The rotator (:mod:`.bugsink_rotator`) and the e2e
test use it; a login is *accepted* when the form answers with a redirect (302) and refused
when it renders the form again (200).

Passwords are posted in form bodies only, never in a URL.
"""

from __future__ import annotations

import re

import httpx

_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


class BugsinkError(Exception):
    """Bugsink answered something a browser would not have expected."""


def _token(page: httpx.Response) -> str:
    found = _CSRF.search(page.text)
    if found is None:
        raise BugsinkError(f"{page.request.url.path}: no CSRF token in the page "
                           f"(HTTP {page.status_code})")
    return found.group(1)


def _post(client: httpx.Client, path: str, data: dict[str, str]) -> httpx.Response:
    token = _token(client.get(path))
    return client.post(path, data={"csrfmiddlewaretoken": token, **data},
                       headers={"Referer": f"{client.base_url}{path}"})


def login(base_url: str, user: str, password: str, *, timeout: float = 10.0
          ) -> httpx.Client | None:
    """A client with a logged-in session, or None when Bugsink refuses the password."""
    client = httpx.Client(base_url=base_url, follow_redirects=False, timeout=timeout)
    answer = _post(client, "/accounts/login/", {"username": user, "password": password})
    if answer.status_code == 302:
        return client
    client.close()
    if answer.status_code == 200:
        return None
    raise BugsinkError(f"login: HTTP {answer.status_code}")


def accepts(base_url: str, user: str, password: str) -> bool:
    client = login(base_url, user, password)
    if client is None:
        return False
    client.close()
    return True


def change_password(client: httpx.Client, old: str, new: str) -> None:
    """Bugsink's change-password form (Django's PasswordChangeForm) for the logged-in user."""
    answer = _post(client, "/accounts/change-password/",
                   {"old_password": old, "new_password1": new, "new_password2": new})
    if answer.status_code != 302:
        raise BugsinkError(f"change-password: the form was refused (HTTP {answer.status_code})")


def create_team(client: httpx.Client, name: str) -> None:
    answer = _post(client, "/teams/new/", {"name": name, "visibility": "1"})
    if answer.status_code != 302:
        raise BugsinkError(f"new team: the form was refused (HTTP {answer.status_code})")


def team_names(client: httpx.Client) -> str:
    """The team list page's text (a team created earlier is named in it)."""
    page = client.get("/teams/", follow_redirects=True)
    if page.status_code != 200:
        raise BugsinkError(f"teams: HTTP {page.status_code}")
    return page.text

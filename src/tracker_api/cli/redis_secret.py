"""The Redis password kept off command lines.

Every user of the machine can read a process's command line (`ps`, /proc/PID/cmdline), and the
bjoern workers `tracker serve` forks inherit it; a process's environment (/proc/PID/environ)
and a file of mode 0600 are its owner's alone. So the URL comes from TRACKER_REDIS_URL (the
systemd units read it from /etc/tracker/tracker.env), or the URL without its password and the
password from a file, `--redis-password-file`. A password file rather than a file holding the
whole URL: secret stores hand a service the secret alone, as a file (Kubernetes and Docker
secrets, systemd's LoadCredential=, the `*_FILE` variables of Docker's database images), while
the rest of the URL (hosts, Sentinel service, database) is configuration that differs per node
and may be seen.

A password that arrives on the command line anyway is masked in the process title (before any
worker forks, so none shows it) and a warning says how to pass it instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import click

PASSWORD_FILE_VARIABLE = "TRACKER_REDIS_PASSWORD_FILE"
PASSWORD_FILE_OPTION = "--redis-password-file"
MASK = "***"
# tracker_core.infra.topology reads a bare "SECRET@" (no colon) as the password in these.
_BARE_PASSWORD_SCHEMES = ("redis+sentinel://", "redis+cluster://")


def _split(url: str) -> tuple[str, str | None, str]:
    """URL as (scheme://, its userinfo or None, the rest from the host on). The userinfo runs
    to the authority's last '@' (a raw '@' in a password, which redis-py accepts)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url, None, ""
    end = min([i for i in (rest.find(c) for c in "/?#") if i >= 0], default=len(rest))
    userinfo, at, hosts = rest[:end].rpartition("@")
    if not at:
        return scheme + sep, None, rest
    return scheme + sep, userinfo, hosts + rest[end:]


def secrets_in(url: str) -> list[str]:
    """The passwords URL holds, as written in it: its userinfo's and a `password=` parameter's."""
    head, userinfo, rest = _split(url)
    found = []
    if userinfo:
        _user, colon, password = userinfo.partition(":")
        if password:
            found.append(password)
        elif not colon and head in _BARE_PASSWORD_SCHEMES:
            found.append(userinfo)
    query = rest.partition("?")[2].partition("#")[0]
    for parameter in query.split("&"):
        name, _, value = parameter.partition("=")
        if name == "password" and value:
            found.append(value)
    return found


def masked(text: str, secrets: list[str]) -> str:
    """TEXT with each of SECRETS replaced by the mask, wherever it stands."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def with_password(url: str, password: str) -> str:
    """URL with PASSWORD (percent-encoded) as its userinfo's password; a user name stays."""
    if "://" not in url:
        raise click.UsageError(f"{PASSWORD_FILE_OPTION} needs a Redis URL (redis://HOST:PORT/DB ...)")
    if secrets_in(url):
        raise click.UsageError(f"{PASSWORD_FILE_OPTION} and a password in the Redis URL: give it once")
    head, userinfo, rest = _split(url)
    return f"{head}{userinfo or ''}:{quote(password, safe='')}@{rest}"


def read_password_file(path: str) -> str:
    """The password in the file at PATH: its one line, without the line end."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise click.BadParameter(f"cannot read {path}: {reason}", param_hint=PASSWORD_FILE_OPTION) from None
    password = text.rstrip("\r\n")
    if not password or "\n" in password:
        raise click.BadParameter(
            f"{path} must hold the password on one line", param_hint=PASSWORD_FILE_OPTION
        )
    return password


def _command_line() -> list[str]:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return f.read().decode(errors="replace").rstrip("\0").split("\0")
    except OSError:
        return []


def hide_from_command_line(url: str) -> bool:
    """Mask URL's password in this process's title, where it came on the command line; warn.
    Whether no command line of this process shows it now."""
    secrets = secrets_in(url)
    if not secrets:
        return True
    hidden = _set_title(secrets)
    how = f"pass the URL in TRACKER_REDIS_URL, or the password in a file with {PASSWORD_FILE_OPTION}"
    # On stderr as click says "Error: ...": logging is not set up yet (a process command sets it
    # up next, an admin command never), and this must show whatever the command.
    if hidden:
        click.echo(
            "Warning: the Redis password came on the command line, which every local user can "
            f"read: masked in the process title now; {how}",
            err=True,
        )
    else:
        click.echo(
            f"Warning: the Redis password is on the command line, which every local user can read: {how}",
            err=True,
        )
    return hidden


def hide_secret_from_command_line(secret: str, what: str, envvar: str) -> bool:
    """Mask SECRET (WHAT it is, for the warning) in this process's title where it came on the
    command line, and say to pass it in ENVVAR; whether no command line of this process shows it."""
    if not secret or not any(secret in arg for arg in _command_line()):
        return True
    hidden = _set_title([secret])
    click.echo(
        f"Warning: the {what} came on the command line, which every local user can read"
        + (": masked in the process title now" if hidden else "")
        + f"; pass it in {envvar}",
        err=True,
    )
    return hidden


def _set_title(secrets: list[str]) -> bool:
    args = _command_line()
    if not any(secret in arg for arg in args for secret in secrets):
        return True  # not on this process's own command line (a test's in-process run)
    try:
        import setproctitle
    except ImportError:
        return False
    with open("/proc/self/comm") as f:
        name = f.read().rstrip("\n")
    # Within the command line's own space: moving the environment aside to make room (its
    # default) would leave /proc/PID/environ empty for whoever debugs the process.
    unset = "SPT_NOENV" not in os.environ
    os.environ.setdefault("SPT_NOENV", "1")
    try:
        setproctitle.setproctitle(" ".join(masked(arg, secrets) for arg in args))
    finally:
        if unset:
            del os.environ["SPT_NOENV"]
    setproctitle.setthreadtitle(name)  # it names the process after the title too (ps -o comm)
    return not any(secret in arg for arg in _command_line() for secret in secrets)

"""Where a result came from: the package version, the git commit (and whether the checkout had local changes),
Python and platform, the viewer stack's versions, when and how the command ran -- written into every run.json and
report, and printed by ``medopenclaw --version``, so a number in a table can be traced to the code that made it.

The command line is kept with its secrets removed (:mod:`.redaction`): values of options named like a key, token
or password, URL credentials and secret query parameters, secret-named JSON fields, and any text equal to an API
key found in the environment.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from .redaction import QUERY_SECRET_WORDS, REDACTED, is_secret_name, redact_text
from .settings import SETTINGS, value

DISTRIBUTIONS = ("slicer-core", "vtk")  # the viewer stack a result depends on
# a variable named like a secret holds a key only when its value is at least this long: HF_TOKEN=true is no key,
# and redacting "true" everywhere would hide ordinary words
MIN_NAMED_SECRET_CHARS = 8
OPTION = re.compile(r"^--?[\w-]+$")


def package_version() -> str:
    """The installed distribution's version (the package's own ``__version__`` inside Slicer, where nothing
    is pip-installed)."""
    from importlib import metadata

    try:
        return metadata.version("medopenclaw")
    except metadata.PackageNotFoundError:
        return __version__


def distribution_versions(names: tuple[str, ...] = DISTRIBUTIONS) -> dict[str, str | None]:
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


# git as provenance runs it: no hook, no fsmonitor, no system or user configuration, no index written (nothing a
# repository's own configuration names is ever executed), no GIT_* variable of the caller redirecting it
GIT_NEUTRAL = ("-c", "core.fsmonitor=false", "-c", f"core.hooksPath={os.devnull}", "-c", "core.untrackedCache=false")
GIT_ENVIRONMENT = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_OPTIONAL_LOCKS": "0",
                   "GIT_TERMINAL_PROMPT": "0"}


def _git(folder: Path, *arguments: str) -> str | None:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    try:
        completed = subprocess.run(["git", *GIT_NEUTRAL, "-C", str(folder), *arguments], capture_output=True,
                                   text=True, timeout=10, check=False, env={**environment, **GIT_ENVIRONMENT},
                                   stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout if completed.returncode == 0 else None


def _changed(top: Path) -> bool | None:
    """Whether tracked files differ from HEAD, read without refreshing (or writing) the index: ``diff-index``
    lists every file whose stat data changed; a listed file whose content hashes (no filters) to HEAD's blob
    is unchanged."""
    raw = _git(top, "diff-index", "-z", "HEAD", "--")
    if raw is None:
        return None
    fields = raw.split("\0")
    heads: dict[str, str] = {}
    for meta, path in zip(fields[0::2], fields[1::2]):
        old_mode, new_mode, head_blob, _, status = meta.lstrip(":").split()
        if status != "M" or old_mode != new_mode:
            return True
        heads[path] = head_blob
    if not heads:
        return False
    hashed = _git(top, "hash-object", "--no-filters", "--", *heads)
    return hashed is None or hashed.split() != list(heads.values())


def source_revision(folder: Path | None = None) -> dict | None:
    """{commit, dirty} of the git checkout the code runs from, or None when it is not a checkout (a wheel) or the
    repository around it does not track it (the package copied into someone else's working tree). ``dirty``:
    tracked files differ from the commit (untracked files are not counted)."""
    folder = folder or Path(__file__).resolve().parent
    top = _git(folder, "rev-parse", "--show-toplevel")
    commit = _git(folder, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if not top or not commit:
        return None
    top_path = Path(top.strip())
    try:
        marker = (folder / "__init__.py").resolve().relative_to(top_path.resolve()).as_posix()
    except ValueError:
        return None
    if not _git(top_path, "ls-tree", "--name-only", "HEAD", "--", marker):  # HEAD does not hold the package
        return None
    return {"commit": commit.strip(), "dirty": _changed(top_path)}


def environment_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Every key the environment holds: MedOpenClaw's secret settings and every variable named like a secret
    (OPENAI_API_KEY, GEMINI_API_KEY, AZURE_OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY, HF_TOKEN, ...), so each
    provider's own key variable is covered without core knowing the providers."""
    environ = os.environ if environ is None else environ
    own = [value(setting.name, environ) for setting in SETTINGS if setting.secret]
    named = [text for name, text in environ.items()
             if is_secret_name(name) and len(text.strip()) >= MIN_NAMED_SECRET_CHARS]
    return tuple(dict.fromkeys(secret for secret in own + named if secret))


def redact_argv(argv: list[str], secrets: tuple[str, ...] | None = None) -> list[str]:
    """The command line with the value of every secret-named option (``--api-key X``, ``--token=X``) and every
    secret inside a value (URL credentials, JSON fields, an API key from the environment) replaced."""
    secrets = environment_secrets() if secrets is None else secrets
    cleaned: list[str] = []
    hide_next = False
    for argument in argv:
        if hide_next:
            cleaned.append(REDACTED)
            hide_next = False
            continue
        name, equals, _ = argument.partition("=")
        if OPTION.match(name) and is_secret_name(name.lstrip("-"), QUERY_SECRET_WORDS):
            cleaned.append(f"{name}={REDACTED}" if equals else argument)
            hide_next = not equals
            continue
        cleaned.append(redact_text(argument, secrets))
    return cleaned


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def provenance(argv: list[str] | None = None, program: str = "medopenclaw") -> dict:
    """What made a result, as of now (``started`` is this moment; :func:`finish` adds the end and duration)."""
    return {"package": "medopenclaw", "version": package_version(), "source": source_revision(),
            "python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform.platform(), "versions": distribution_versions(),
            "started": now_utc(),
            "command": None if argv is None else [program, *redact_argv(list(argv))]}


def finish(record: dict) -> dict:
    """``record`` with the finishing time and the duration in seconds."""
    finished = datetime.now(timezone.utc)
    try:
        duration = round((finished - datetime.fromisoformat(record["started"])).total_seconds(), 1)
    except (KeyError, TypeError, ValueError):
        duration = None
    return {**record, "finished": finished.isoformat(timespec="milliseconds"), "duration_s": duration}


def version_text() -> str:
    """One line for ``medopenclaw --version``."""
    source = source_revision()
    where = ""
    if source:
        where = f" (git {source['commit'][:12]}{', local changes' if source['dirty'] else ''})"
    stack = ", ".join(f"{name} {version or 'not installed'}" for name, version in distribution_versions().items())
    return (f"medopenclaw {package_version()}{where}; Python {platform.python_version()} on "
            f"{platform.system()} {platform.machine()}; {stack}")


def summary(record: dict | None) -> str:
    """One line naming a recorded provenance (for report pages): version, commit, when, how long."""
    if not isinstance(record, dict):
        return "not recorded"
    source = record.get("source") if isinstance(record.get("source"), dict) else None
    parts = [f"medopenclaw {record.get('version', '?')}"]
    if source and source.get("commit"):
        parts.append(f"git {str(source['commit'])[:12]}" + (" + local changes" if source.get("dirty") else ""))
    parts.append(f"Python {record.get('python', '?')}")
    if isinstance(record.get("started"), str):
        parts.append(f"started {record['started'][:16].replace('T', ' ')} UTC")
    if isinstance(record.get("duration_s"), (int, float)):
        parts.append(f"{record['duration_s']:.0f} s")
    return " · ".join(parts)

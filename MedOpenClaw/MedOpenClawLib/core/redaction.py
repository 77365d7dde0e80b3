"""The one redaction of secrets, for every place one could be written: run.json, episode traces, audit records,
transcripts, reports, the recorded command line, error messages and logs.

A secret is found three ways: by name (a JSON field, header, option or URL query parameter named like a key,
token, password, signature or authorization, at any depth), by place (the userinfo of a URL,
``https://user:pass@host``) and by value (a key the configuration or the environment holds, wherever its text
appears).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "***"
# a name is secret when it is one of these or ends in ``_`` + one (after lower-casing, ``-`` read as ``_``):
# api_key, x-api-key, access_token, Authorization, client_secret; input_tokens and max_tokens are not
SECRET_WORDS = ("api_key", "apikey", "authorization", "token", "password", "passwd", "secret", "signature",
                "cookie", "credential", "credentials", "private_key", "access_key")
# URL query parameters name secrets more tersely: Google's ?key=, Azure SAS ?sig=, ?auth=
QUERY_SECRET_WORDS = (*SECRET_WORDS, "key", "sig", "auth")
MIN_VALUE_CHARS = 4  # a secret matched by value alone: shorter texts would redact ordinary words
# every pattern starts where a name can only start (a look-behind), so a long run of name characters is tried once,
# not once per position: redaction runs over model text too and must stay linear
_NAME = r"[A-Za-z0-9_.\-]+"
_NAME_START = r"(?<![A-Za-z0-9_.\-])"
URL_USERINFO = re.compile(r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*://)[^/@\s\"'<>]+@")
QUERY_PARAMETER = re.compile(r"([?&;])(" + _NAME + r")=([^&#\s\"'<>]*)")
JSON_FIELD = re.compile(r'("(' + _NAME + r')"\s*:\s*)"(?:[^"\\]|\\.)*"')
HEADER_LINE = re.compile(_NAME_START + "(" + _NAME + r")([ \t]*:[ \t]*)((?:Bearer|Basic|Token)[ \t]+)?[^\s,;\"'}]+",
                         re.IGNORECASE)


def _normal(name: str) -> str:
    return str(name).lower().replace("-", "_")


@lru_cache(maxsize=4096)  # the same few names (environment variables, JSON fields) are asked about again and again
def is_secret_name(name: str, words: tuple[str, ...] = SECRET_WORDS) -> bool:
    """Whether a field, header or option called ``name`` holds a secret."""
    normal = _normal(name).lstrip("_")
    return any(normal == word or normal.endswith("_" + word) for word in words)


def redact_url(url: str) -> str:
    """``url`` without its userinfo and with the value of every secret-named query parameter replaced."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_name(name, QUERY_SECRET_WORDS) for name, _ in pairs):
            query = urlencode([(name, REDACTED if is_secret_name(name, QUERY_SECRET_WORDS) else value)
                               for name, value in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` (a message, a command-line argument, a log line) without: any of ``secrets`` (the stripped form too:
    a key read from a file often ends in a newline), URL userinfo, secret query parameters, JSON fields named
    like a secret, and ``Authorization: Bearer ...``-style header lines."""
    for secret in secrets:
        for form in {secret, secret.strip()}:
            if len(form) >= MIN_VALUE_CHARS:
                text = text.replace(form, REDACTED)
    text = URL_USERINFO.sub(lambda match: match.group(1) + REDACTED + "@", text)
    text = QUERY_PARAMETER.sub(lambda match: match.group(0) if not is_secret_name(match.group(2), QUERY_SECRET_WORDS)
                               else f"{match.group(1)}{match.group(2)}={REDACTED}", text)
    text = JSON_FIELD.sub(lambda match: match.group(0) if not is_secret_name(match.group(2))
                          else f'{match.group(1)}"{REDACTED}"', text)
    return HEADER_LINE.sub(lambda match: match.group(0) if not is_secret_name(match.group(1))
                           else f"{match.group(1)}{match.group(2)}{REDACTED}", text)


def redact_value(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """A JSON-like value with every secret-named field's value replaced (at any depth) and every string passed
    through :func:`redact_text`; the input is not changed."""
    if isinstance(value, dict):
        return {key: REDACTED if is_secret_name(key) and value[key] not in (None, "") else
                redact_value(item, secrets) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(item, secrets) for item in value]
    if isinstance(value, str):
        return redact_text(value, secrets)
    return value

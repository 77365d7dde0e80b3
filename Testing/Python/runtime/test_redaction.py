"""The one redaction (MedOpenClawLib.core.redaction): secrets by name, by place in a URL and by value, in text and in
JSON-like values, in linear time."""

from __future__ import annotations

import pytest

from MedOpenClawLib.core.redaction import is_secret_name, redact_text, redact_url, redact_value
from MedOpenClawLib.providers import ProviderConfig


@pytest.mark.parametrize(("url", "expected"), [
    ("http://user:pass@host:8000/v1", "http://***@host:8000/v1"),
    ("https://h/v1?api_key=s1&model=m", "https://h/v1?api_key=***&model=m"),
    ("https://h/v1beta?key=s2", "https://h/v1beta?key=***"),
    ("https://acct.blob/x?sv=2024&sig=s3&se=1", "https://acct.blob/x?sv=2024&sig=***&se=1"),
    ("https://h/v1?access_token=s4&api-version=2024-10-21", "https://h/v1?access_token=***&api-version=2024-10-21"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
])
def test_urls_lose_userinfo_and_secret_query_parameters(url, expected):
    assert redact_url(url) == expected
    assert redact_text(f"POST {url} failed") == f"POST {expected} failed"


def test_names_text_and_values():
    assert all(is_secret_name(name) for name in ("api_key", "x-api-key", "Authorization", "client_secret",
                                                  "access_token", "X-Goog-Api-Key", "Cookie", "password"))
    assert not any(is_secret_name(name) for name in ("input_tokens", "max_tokens", "top_k", "grid_key", "keyframes"))
    assert redact_text('{"api_key": "s1", "top_k": 20}') == '{"api_key": "***", "top_k": 20}'
    assert redact_text("Authorization: Bearer s2-abcdef, x-api-key: s3") == \
        "Authorization: ***, x-api-key: ***"
    assert redact_text("the key sk-12345678 leaked", ("sk-12345678\n",)) == "the key *** leaked"
    body = {"api_key": "s1", "headers": {"Authorization": "Bearer s2"}, "top_k": 20, "empty_token": "",
            "note": "see https://u:p@h/x"}
    assert redact_value(body) == {"api_key": "***", "headers": {"Authorization": "***"}, "top_k": 20,
                                  "empty_token": "", "note": "see https://***@h/x"}
    assert body["api_key"] == "s1"  # the value itself is not changed


def test_provider_records_carry_no_secret():
    config = ProviderConfig(kind="openai", model="m", base_url="http://u:pw-1234@h:1/v1?key=q-1234",
                            api_key="sk-abcdefgh", extra_body={"api_key": "b-1234", "Authorization": "Bearer h-1234",
                                                                "top_k": 20})
    for record in (config.public(), config.identity()):
        text = repr(record)
        assert not any(secret in text for secret in ("pw-1234", "q-1234", "b-1234", "h-1234", "sk-abcdefgh"))
        assert record["extra_body"]["top_k"] == 20
    assert config.extra_body["api_key"] == "b-1234"  # still sent


@pytest.mark.parametrize("shape", ["a-" * 100_000, "a." * 100_000 + "://", '"' + "a" * 200_000,
                                   "?" + "a" * 200_000, "token" + " " * 200_000])
def test_redaction_is_linear(shape):
    assert redact_text(shape) == shape  # finishes (each pattern tries a run of name characters once)

"""The context window a server reports is used (OpenRouter, LM Studio, vLLM, llama.cpp listings in their own
shapes); a server that reports none gets one pre-flight line saying which window and image limit are assumed."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler

import pytest
from agents_fakes import FakeModelServer, QuietServer, Scripted, openai_reply

from MedOpenClawLib.providers import ProviderConfig, RetryPolicy, make_provider
from MedOpenClawLib.providers.discovery import reported_window

MODEL = "qwen/qwen2.5-vl-72b-instruct"
# GET answers in each server's documented shape (OpenRouter /api/v1/models, LM Studio /api/v0/models/{model},
# vLLM /v1/models, llama.cpp /props); other models listed first, as a shared gateway lists them
LISTINGS = {
    "openrouter": {"/models": {"data": [{"id": "openai/gpt-4o", "context_length": 128000},
                                        {"id": MODEL, "context_length": 32768,
                                         "top_provider": {"context_length": 32768}}]}},
    "lmstudio": {"/models": {"object": "list", "data": [{"id": MODEL, "object": "model"}, {"id": "other"}]},
                 f"/api/v0/models/{MODEL.replace('/', '%2F')}": {"id": MODEL, "max_context_length": 131072,
                                                                 "loaded_context_length": 8192}},
    "vllm": {"/v1/models": {"object": "list", "data": [{"id": "served", "max_model_len": 65536}]}},
    "llamacpp": {"/props": {"default_generation_settings": {"n_ctx": 4096}}},
}
EXPECTED = {"openrouter": 32768, "lmstudio": 8192, "vllm": 65536, "llamacpp": 4096}


class Listing:
    """Answers GET requests from a path -> JSON table, 404 otherwise."""

    def __init__(self, table: dict):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server API
                payload = json.dumps(table[self.path]).encode() if self.path in table else b"{}"
                self.send_response(200 if self.path in table else 404)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def openai_client(base: str):
    """The GET discovery makes: through the openai SDK client of a provider at ``base``."""
    return make_provider(ProviderConfig(kind="openai", model=MODEL, base_url=base, api_key="k"))._get


@pytest.mark.parametrize("server", list(LISTINGS))
def test_the_window_a_server_reports_for_the_model_is_read(server):
    listing = Listing(LISTINGS[server])
    try:
        base = f"{listing.url}/v1" if server in ("vllm", "llamacpp") else listing.url
        found = reported_window(openai_client(base), base, MODEL)
    finally:
        listing.close()
    assert found is not None and found[0] == EXPECTED[server]


def test_a_server_that_reports_nothing_gets_one_line_naming_the_assumed_limits():
    tool_call = openai_reply(calls=[("report_colour", '{"colour": "red"}')])
    with FakeModelServer([Scripted(tool_call)]) as server:
        config = ProviderConfig(kind="openai", model=MODEL, base_url=server.url, api_key="k",
                                retry=RetryPolicy(max_retries=0))
        warning = make_provider(config).preflight()
    assert warning is not None and len(warning.splitlines()) == 1
    assert "assuming 16384 tokens and 8 images per request (the openai-compatible profile)" in warning


def test_a_listing_over_the_reply_ceiling_is_not_read():
    """A /models answer larger than any reply may be (MAX_RESPONSE_BYTES) is refused unread, not parsed."""
    from MedOpenClawLib.providers.transport import MAX_RESPONSE_BYTES

    padding = [{"id": f"m{i}", "pad": "x" * 1000} for i in range(MAX_RESPONSE_BYTES // 1000 + 10)]
    listing = Listing({"/v1/models": {"object": "list", "data": [*padding, {"id": "served", "max_model_len": 65536}]}})
    try:
        assert reported_window(openai_client(f"{listing.url}/v1"), f"{listing.url}/v1", "served") is None
    finally:
        listing.close()

"""Anthropic's Messages API on the clouds, through the ``anthropic`` SDK's own clients: Amazon Bedrock
(``AnthropicBedrock``: ``InvokeModel``, SigV4) and Google Vertex AI (``AnthropicVertex``: ``rawPredict``).

Both take the Messages body of :mod:`.anthropic_messages`; the SDK moves the model into the URL and the body keeps
the API version (``anthropic_version``); only authentication differs. The cloud credentials libraries are optional
extras (``medopenclaw[bedrock]``: boto3 for SigV4; ``medopenclaw[vertex]``: google-auth for Application Default
Credentials), needed when the first request is signed; without them the run stops with one line saying so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anthropic
import httpx2

from .anthropic_messages import AnthropicProvider
from .google_credentials import GoogleToken
from .http import ProviderError
from .messages import Message
from .streaming import stream_events

if TYPE_CHECKING:
    from .config import ProviderConfig

BEDROCK_VERSION = "bedrock-2023-05-31"
VERTEX_VERSION = "vertex-2023-10-16"


class _CloudMessages(AnthropicProvider):
    version = ""

    def _request_body(self, messages: list[Message], wire_tools: list[dict], allow_tools: bool) -> tuple[dict, int]:
        body, images = super()._request_body(messages, wire_tools, allow_tools)
        return {"anthropic_version": self.version, **body}, images

    def _extra_headers(self) -> dict:
        return {}  # the SDK client authenticates every request (a signature or a token)


class AnthropicBedrockProvider(_CloudMessages):
    """``POST {base}/model/{model}/invoke`` (``invoke-with-response-stream`` streamed, AWS's binary event stream),
    SigV4-signed with the standard AWS credential chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    AWS_SESSION_TOKEN, AWS_PROFILE, ...) for ``--region``; a Bedrock API key given as MEDOPENCLAW_API_KEY goes as
    a Bearer token instead."""

    version = BEDROCK_VERSION

    def _make_client(self) -> anthropic.AnthropicBedrock:
        if not self.config.api_key:
            try:  # optional: the bedrock extra (the SDK signs with boto3's credential chain)
                import boto3
                import botocore.auth  # noqa: F401 - what signs
            except ImportError:
                raise ProviderError("anthropic-bedrock signs its requests with boto3: pip install "
                                    "'medopenclaw[bedrock]'", fatal=True) from None
            if boto3.Session().get_credentials() is None:
                raise ProviderError("anthropic-bedrock found no AWS credentials: set AWS_ACCESS_KEY_ID and "
                                    "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)", fatal=True)
        return anthropic.AnthropicBedrock(api_key=self.config.api_key or None, aws_region=self.config.region,
                                          base_url=self.config.base_url, max_retries=0, http_client=self.http)

    def _events(self, response: httpx2.Response) -> list[dict]:
        """AWS event-stream frames, each a Messages event, decoded by the SDK's own Bedrock decoder."""
        from anthropic.lib.bedrock._stream_decoder import AWSEventStreamDecoder  # needs botocore (bedrock extra)

        return stream_events(event.data for event in AWSEventStreamDecoder().iter_bytes(iter([response.content])))


class AnthropicVertexProvider(_CloudMessages):
    """``POST {base}/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict``
    (``streamRawPredict`` streamed) with a Bearer access token: MEDOPENCLAW_API_KEY (``gcloud auth
    print-access-token``) or Google's Application Default Credentials (:mod:`.google_credentials`), refreshed when
    they expire."""

    version = VERTEX_VERSION

    def __init__(self, config: ProviderConfig, http: httpx2.Client | None = None):
        super().__init__(config, http)
        self._token = GoogleToken(config.kind)

    def _make_client(self) -> anthropic.AnthropicVertex:
        return anthropic.AnthropicVertex(region=self.config.region, project_id=self.config.project,
                                         base_url=f"{self.config.base_url}/v1", max_retries=0, http_client=self.http)

    def _extra_headers(self) -> dict:
        return self._token.bearer(self.config.api_key)  # the SDK adds no token of its own to an authorised request

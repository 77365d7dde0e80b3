"""Anthropic's Messages API on the clouds: Amazon Bedrock (``InvokeModel``) and Google Vertex AI (``rawPredict``).

Both take the Messages body of :mod:`.anthropic_messages` with the model in the URL instead of the body and the
API version in the body (``anthropic_version``); only authentication differs. The cloud SDKs are optional extras
(``medopenclaw[bedrock]``: botocore for SigV4; ``medopenclaw[vertex]``: google-auth for Application Default
Credentials), imported when the first request is signed; without them the run stops with one line saying so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from .anthropic_messages import AnthropicProvider
from .google_credentials import GoogleToken
from .http import ProviderError
from .messages import Message

if TYPE_CHECKING:
    import requests

    from .config import ProviderConfig

BEDROCK_VERSION = "bedrock-2023-05-31"
VERTEX_VERSION = "vertex-2023-10-16"


class _CloudMessages(AnthropicProvider):
    version = ""

    def _request_body(self, messages: list[Message], wire_tools: list[dict], allow_tools: bool) -> tuple[dict, int]:
        body, images = super()._request_body(messages, wire_tools, allow_tools)
        body.pop("model")
        return {"anthropic_version": self.version, **body}, images

    def _headers(self) -> dict:
        return {"Content-Type": "application/json"}


class AnthropicBedrockProvider(_CloudMessages):
    """``POST {base}/model/{model}/invoke``, SigV4-signed with the standard AWS credential chain (AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_PROFILE, ...) for ``--region``; a Bedrock API key given as
    MEDOPENCLAW_API_KEY goes as a Bearer token instead."""

    version = BEDROCK_VERSION
    _credentials = None

    def _url(self) -> str:
        return f"{self.config.base_url}/model/{quote(self.config.model, safe='')}/invoke"

    def _sign(self, data: bytes) -> dict:
        if self.config.api_key:
            return {"Authorization": f"Bearer {self.config.api_key}"}
        try:  # optional: the bedrock extra
            from botocore.auth import SigV4Auth
            from botocore.awsrequest import AWSRequest
            from botocore.session import Session
        except ImportError:
            raise ProviderError("anthropic-bedrock signs its requests with botocore: pip install "
                                "'medopenclaw[bedrock]'", fatal=True) from None
        if self._credentials is None:
            self._credentials = Session().get_credentials()
        if self._credentials is None:
            raise ProviderError("anthropic-bedrock found no AWS credentials: set AWS_ACCESS_KEY_ID and "
                                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)", fatal=True)
        request = AWSRequest("POST", self._url(), data=data, headers=self._headers())
        SigV4Auth(self._credentials, "bedrock", self.config.region).add_auth(request)
        return dict(request.headers.items())


class AnthropicVertexProvider(_CloudMessages):
    """``POST {base}/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict`` with a
    Bearer access token: MEDOPENCLAW_API_KEY (``gcloud auth print-access-token``) or Google's Application Default
    Credentials, refreshed when they expire."""

    version = VERTEX_VERSION

    def __init__(self, config: ProviderConfig, session: requests.Session | None = None):
        super().__init__(config, session)
        self._token = GoogleToken(config.kind)

    def _url(self) -> str:
        return (f"{self.config.base_url}/v1/projects/{quote(self.config.project or '', safe='')}/locations/"
                f"{quote(self.config.region or '', safe='')}/publishers/anthropic/models/"
                f"{quote(self.config.model, safe='@')}:{'streamRawPredict' if self.streaming() else 'rawPredict'}")

    def _sign(self, data: bytes) -> dict:
        return self._token.bearer(self.config.api_key)

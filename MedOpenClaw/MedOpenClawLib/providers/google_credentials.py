"""A Bearer access token for Google Cloud (Vertex AI): ``MEDOPENCLAW_API_KEY`` when given (``gcloud auth
print-access-token``), else Application Default Credentials, refreshed when they expire. google-auth is the
optional ``vertex`` extra; without it the run stops with one line saying so."""

from __future__ import annotations

from .http import ProviderError

GOOGLE_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


class GoogleToken:
    """Application Default Credentials of one provider, loaded on the first request."""

    def __init__(self, provider: str):
        self.provider = provider  # the --provider value, for the messages
        self._credentials = None

    def bearer(self, api_key: str) -> dict:
        """The Authorization header: the given token, else a valid ADC token."""
        return {"Authorization": f"Bearer {api_key or self._token()}"}

    def _token(self) -> str:
        try:  # optional: the vertex extra
            import google.auth
            import google.auth.exceptions
            import google.auth.transport.requests
        except ImportError:
            raise ProviderError(f"{self.provider} needs an access token: set MEDOPENCLAW_API_KEY (gcloud auth "
                                "print-access-token) or pip install 'medopenclaw[vertex]' for Application Default "
                                "Credentials", fatal=True) from None
        try:
            if self._credentials is None:
                self._credentials, _ = google.auth.default(scopes=[GOOGLE_SCOPE])
            if not self._credentials.valid:
                self._credentials.refresh(google.auth.transport.requests.Request())
        except google.auth.exceptions.GoogleAuthError as error:
            raise ProviderError(f"{self.provider} has no Google credentials: {error}", fatal=True) from None
        return self._credentials.token

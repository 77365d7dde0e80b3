"""What each model server accepts per request, and the estimate every request is checked against before it is sent.

The numbers are the vendors' documented limits (cited per profile). A request is estimated from the neutral
conversation: text at 3 characters per token (conservative for JSON-heavy prompts: real tokenizers give 3.5-4),
images by the vendor's image-token rule, plus the output-token reservation (``max_tokens``), which servers such as
vLLM count against the context window too. :mod:`.conversation` trims until the estimate fits.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

CHARS_PER_TOKEN = 3.0
MESSAGE_OVERHEAD_TOKENS = 8  # role markers and separators of a chat template, per message
CONTEXT_MARGIN = 0.05  # of the window, kept free for what the estimate cannot see (template, tokenizer spread)
LOCAL_DEFAULT_CONTEXT = 16_384  # a local server whose window is not known: the smallest listed in the docs below


@dataclass(frozen=True)
class ServerLimits:
    """Documented per-request limits of one kind of server; None means the server documents no such limit."""

    name: str
    context_window: int | None = None  # prompt + max_tokens, in tokens
    max_images: int | None = None  # images per request
    max_request_bytes: int | None = None  # the whole JSON body
    max_image_b64: int | None = None  # one image's base64 text
    max_image_edge: int | None = None  # pixels, longest side
    many_images: int | None = None  # above this many images per request ...
    many_images_edge: int | None = None  # ... every image must fit this edge
    image_rule: str = "max"  # see image_tokens
    user_after_tool: bool = True  # False: a user message may not follow tool messages (Mistral)
    schema_dialect: str = "openai"  # "openai" | "openai-strict" | "anthropic" | "gemini": see tool_schemas
    discover: bool = False  # a local server that may report its window (vLLM /v1/models, llama.cpp /props)

    def to_json(self) -> dict:
        return {key: getattr(self, key) for key in self.__dataclass_fields__}


PROFILES: dict[str, ServerLimits] = {
    # platform.openai.com/docs/guides/images-vision: up to 500 image inputs and 50 MB of payload per request;
    # gpt-4o / gpt-4.1 context 128k (gpt-4.1: 1M). Image tokens: 85 + 170 per 512 px tile (high detail).
    "openai": ServerLimits("openai", 128_000, 500, 50_000_000, None, None, image_rule="openai"),
    # the same server with strict function calling ("strict": true: calls always match the schema; the schemas go
    # out in strict mode's subset, see tool_schemas)
    "openai-strict": ServerLimits("openai-strict", 128_000, 500, 50_000_000, None, None, image_rule="openai",
                                  schema_dialect="openai-strict"),
    # docs.anthropic.com/en/docs/build-with-claude/vision: 100 images per API request, 8000x8000 px at most and
    # 2000x2000 px once a request holds more than 20 images, 5 MB per image; 32 MB per request (API errors page:
    # 413 request_too_large); 200k context. Image tokens: width * height / 750.
    "anthropic": ServerLimits("anthropic", 200_000, 100, 32_000_000, 5 * 1024 * 1024, 8000, 20, 2000,
                              image_rule="anthropic", schema_dialect="anthropic"),
    # ai.google.dev/gemini-api/docs/image-understanding: inline data up to 20 MB per request (the whole request);
    # up to 3,600 image files per request; 1M context. Gemini 3 bills an image at media_resolution high: 1120.
    "gemini": ServerLimits("gemini", 1_048_576, 3600, 20_000_000, None, None, image_rule="gemini",
                           schema_dialect="gemini"),
    # docs.mistral.ai (known limitations): Mistral Small/Medium 32,768 tokens; vision: 8 images per request,
    # 10 MB per image; "Unexpected role 'user' after role 'tool'" (invalid_request_message_order, code 3230).
    # Pixtral tokens: one per 16x16 patch plus one per row, images fitted into 1024x1024.
    "mistral": ServerLimits("mistral", 32_768, 8, None, 10_000_000, None, image_rule="mistral",
                            user_after_tool=False),
    # vLLM: the window is --max-model-len (reported by GET /v1/models as max_model_len); a request whose prompt
    # plus max_tokens exceeds it is a 400 "This model's maximum context length is N tokens ...".
    "vllm": ServerLimits("vllm", None, None, None, None, None, image_rule="qwen", discover=True),
    # Ollama: the window is num_ctx (OLLAMA_CONTEXT_LENGTH); a longer prompt is not refused: the oldest messages
    # are dropped silently, so the budget must keep every request inside it.
    "ollama": ServerLimits("ollama", None, None, None, None, None, image_rule="max"),
    # llama.cpp server: --ctx-size (GET /props: default_generation_settings.n_ctx); a longer request is a 400
    # exceed_context_size_error "the request exceeds the available context size".
    "llamacpp": ServerLimits("llamacpp", None, None, None, None, None, image_rule="max", discover=True),
    # any other OpenAI-compatible server (LM Studio, OpenRouter, TGI, ...): the strictest rules of the above
    "openai-compatible": ServerLimits("openai-compatible", None, 8, 20_000_000, 5 * 1024 * 1024, 2000,
                                      image_rule="max", discover=True),
}
PROFILE_NAMES = tuple(PROFILES)


def detect_profile(base_url: str, model: str) -> str:
    """The profile an OpenAI-compatible server most likely is, from its URL and the model name (a provider kind
    that speaks one vendor's API declares its profile instead: :mod:`.kinds`)."""
    url, name = base_url.lower(), model.lower()
    if "generativelanguage.googleapis.com" in url or name.startswith("gemini"):
        return "gemini"
    if "api.mistral.ai" in url or re.match(r"(mistral|ministral|pixtral|devstral|magistral)", name):
        return "mistral"
    if "api.openai.com" in url:
        return "openai"
    if ":11434" in url or "ollama" in url:
        return "ollama"
    return "openai-compatible"


def resolve_limits(profile: str, context_window: int | None = None) -> ServerLimits:
    """The profile's limits, with the window from ``--context-window`` (or discovery) when one is given, else the
    profile's documented one, else :data:`LOCAL_DEFAULT_CONTEXT`."""
    limits = PROFILES[profile]
    return replace(limits, context_window=context_window or limits.context_window or LOCAL_DEFAULT_CONTEXT)


# ------------------------------------------------------------------------------------------ image-token rules
def _fit(width: int, height: int, edge: int) -> tuple[int, int]:
    scale = min(1.0, edge / max(width, height, 1))
    return max(1, round(width * scale)), max(1, round(height * scale))


def _openai(width: int, height: int) -> int:
    width, height = _fit(width, height, 2048)
    scale = 768 / min(width, height)  # the shortest side becomes 768 (counted upward too: the conservative case)
    width, height = max(1, round(width * scale)), max(1, round(height * scale))
    return 85 + 170 * math.ceil(width / 512) * math.ceil(height / 512)


def _anthropic(width: int, height: int) -> int:
    width, height = _fit(width, height, 1568)
    return math.ceil(width * height / 750)


def _qwen(width: int, height: int) -> int:
    return math.ceil(width / 28) * math.ceil(height / 28) + 2


def _gemini(width: int, height: int) -> int:
    tiles = 1 if max(width, height) <= 384 else math.ceil(width / 768) * math.ceil(height / 768)
    return max(1120, 258 * tiles)


def _mistral(width: int, height: int) -> int:
    width, height = _fit(width, height, 1024)
    rows = math.ceil(height / 16)
    return math.ceil(width / 16) * rows + rows


IMAGE_RULES = {"openai": _openai, "anthropic": _anthropic, "qwen": _qwen, "gemini": _gemini, "mistral": _mistral}


def image_tokens(rule: str, width: int, height: int) -> int:
    """Tokens one image costs under a vendor's rule; ``max``: the largest of the OpenAI, Anthropic and Qwen-VL
    rules (an unknown local model), and an image of unknown size is counted as 1024 x 1024."""
    width, height = (width, height) if width > 0 and height > 0 else (1024, 1024)
    if rule == "max":
        return max(IMAGE_RULES[name](width, height) for name in ("openai", "anthropic", "qwen"))
    return IMAGE_RULES[rule](width, height)


def text_tokens(characters: int) -> int:
    return math.ceil(characters / CHARS_PER_TOKEN)


@dataclass
class RequestEstimate:
    """What one request would carry."""

    tokens: int = 0  # prompt tokens, output reservation excluded
    images: int = 0
    bytes: int = 0  # approximate JSON body size
    largest_edge: int = 0
    largest_image_b64: int = 0

    def to_json(self) -> dict:
        return {"tokens": self.tokens, "images": self.images, "bytes": self.bytes, "largest_edge": self.largest_edge}


def over_limit(estimate: RequestEstimate, limits: ServerLimits, max_tokens: int) -> str | None:
    """Why a request of this estimate would be refused (or silently cut) by the server, or None when it fits."""
    if limits.max_images is not None and estimate.images > limits.max_images:
        return f"{estimate.images} images > {limits.max_images} per request ({limits.name})"
    if (limits.many_images is not None and estimate.images > limits.many_images
            and estimate.largest_edge > (limits.many_images_edge or 0)):
        return (f"an image of {estimate.largest_edge} px in a request of {estimate.images} images > "
                f"{limits.many_images_edge} px ({limits.name}: more than {limits.many_images} images)")
    if limits.max_image_edge is not None and estimate.largest_edge > limits.max_image_edge:
        return f"an image of {estimate.largest_edge} px > {limits.max_image_edge} px ({limits.name})"
    if limits.max_image_b64 is not None and estimate.largest_image_b64 > limits.max_image_b64:
        return f"an image of {estimate.largest_image_b64} base64 bytes > {limits.max_image_b64} ({limits.name})"
    if limits.max_request_bytes is not None and estimate.bytes > limits.max_request_bytes:
        return f"a request of {estimate.bytes} bytes > {limits.max_request_bytes} ({limits.name})"
    window = limits.context_window
    if window is not None:
        usable = int(window * (1 - CONTEXT_MARGIN)) - max_tokens
        if estimate.tokens > usable:
            return (f"~{estimate.tokens} prompt tokens + {max_tokens} max_tokens > the {window}-token context "
                    f"window ({limits.name}, {CONTEXT_MARGIN:.0%} kept as margin)")
    return None

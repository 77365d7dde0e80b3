"""Limit-enforcing fakes of real model servers, and a scripted model that behaves like GPT-4o / Claude.

:class:`LimitedModelServer` speaks the OpenAI Chat Completions or the Anthropic Messages wire format on 127.0.0.1
and, per profile, enforces the server's *documented* limits and quirks with the real error shapes -- never kinder
than the real thing. Its token and image counting is its own (not the harness's estimator), so a harness estimate
that is too optimistic fails here. Sources of each rule:

- OpenAI (platform.openai.com/docs/guides/images-vision): 500 images and 50 MB per request; 85 + 170 tokens per
  512 px tile after fitting 2048 px and scaling the short side to 768; context error ``context_length_exceeded``.
- Anthropic (docs.anthropic.com/en/docs/build-with-claude/vision, /api/errors): 100 images per request, 8000 px per
  side and 2000 px once a request holds more than 20 images ("At least one of the image dimensions exceed max
  allowed size for many-image requests: 2000 pixels"), 5 MB per image, 32 MB per request (413
  ``request_too_large``), tokens = w*h/750, "prompt is too long: N tokens > M maximum"; with extended thinking,
  ``max_tokens`` must exceed ``budget_tokens`` and assistant turns holding tool_use must start with their thinking
  blocks, signature intact.
- vLLM (``--max-model-len``; GET /v1/models reports ``max_model_len``): prompt + max_tokens over the window is a 400
  "This model's maximum context length is N tokens. However, you requested ..."; invalid JSON tool arguments in the
  history are a 400; Qwen2-VL images cost one token per 28x28 patch.
- OpenAI strict mode (platform.openai.com/docs/guides/structured-outputs, "Supported schemas"; function calling
  with ``"strict": true``): every object needs ``additionalProperties: false`` and every property in ``required``;
  the root is an object, never ``anyOf``; only the documented keywords (``default``, ``minLength``, ``maxLength``,
  ``uniqueItems``, ``allOf``, ``not``, ``if``/``then``/``else``, ... are refused: "Invalid schema for function
  'f': In context=(...), 'default' is not permitted.", code ``invalid_function_parameters``); the model then sends
  every property, null for those it does not give.
- Gemini 2.5 / 3 OpenAI endpoint (ai.google.dev/gemini-api/docs/openai, /image-understanding, /thought-signatures):
  20 MB inline request limit; Gemini 3 answers 400 when a function call of the history lacks its
  ``extra_content.google.thought_signature``; the schema subset refuses ``additionalProperties``.
- Mistral (docs.mistral.ai; error code 3230): "Unexpected role 'user' after role 'tool'"; 8 images per request;
  32k context (Mistral Small/Medium).
- Ollama (num_ctx): an over-long prompt is *not* refused: the oldest messages are silently dropped (recorded in
  ``dropped`` so a test can assert it never happened).
- llama.cpp server (``--ctx-size``; GET /props reports n_ctx): 400 ``exceed_context_size_error`` "the request
  exceeds the available context size, try increasing it".
- A text-only model (vLLM: "... is not a multimodal model") and a server without tool calling (vLLM: '"auto" tool
  choice requires --enable-auto-tool-choice and --tool-call-parser to be set').
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from agents_fakes import QuietServer


@dataclass
class Profile:
    name: str
    wire: str = "openai"  # or "anthropic"
    context: int | None = None
    max_images: int | None = None
    max_request_bytes: int | None = None
    max_image_b64: int | None = None
    max_image_edge: int | None = None
    many_images: int | None = None
    many_images_edge: int | None = None
    image_rule: str = "qwen"
    report_window: bool = False  # GET /v1/models (vLLM) or /props (llama.cpp) tells the window
    strict_history_json: bool = False  # vLLM: tool-call arguments in the history must be valid JSON
    thought_signatures: bool = False  # Gemini 3
    gemini_schema: bool = False
    strict_tools: bool = False  # OpenAI strict mode: every tool must be strict and in its schema subset
    user_after_tool: bool = True  # Mistral: False
    drop_oldest: bool = False  # Ollama
    thinking_budget: int = 0  # Anthropic extended thinking
    vision: bool = True
    tool_calling: bool = True
    tool_calls_as_text: bool = False  # a server without a tool parser: the model's Hermes syntax reaches content


PROFILES = {
    "openai": Profile("openai", context=128_000, max_images=500, max_request_bytes=50_000_000, image_rule="openai"),
    "openai-strict": Profile("openai-strict", context=128_000, max_images=500, max_request_bytes=50_000_000,
                             image_rule="openai", strict_tools=True),
    "anthropic": Profile("anthropic", "anthropic", 200_000, 100, 32_000_000, 5 * 1024 * 1024, 8000, 20, 2000,
                         image_rule="anthropic"),
    "anthropic-thinking": Profile("anthropic-thinking", "anthropic", 200_000, 100, 32_000_000, 5 * 1024 * 1024,
                                  8000, 20, 2000, image_rule="anthropic", thinking_budget=1024),
    "vllm-32k": Profile("vllm-32k", context=32_768, report_window=True, strict_history_json=True),
    "gemini-2.5": Profile("gemini-2.5", context=1_048_576, max_request_bytes=20_000_000, image_rule="gemini",
                          gemini_schema=True),
    "gemini-3": Profile("gemini-3", context=1_048_576, max_request_bytes=20_000_000, image_rule="gemini",
                        gemini_schema=True, thought_signatures=True),
    "mistral": Profile("mistral", context=32_768, max_images=8, max_image_b64=10_000_000, image_rule="mistral",
                       user_after_tool=False),
    "ollama-32k": Profile("ollama-32k", context=32_768, drop_oldest=True),
    "llamacpp-16k": Profile("llamacpp-16k", context=16_384, report_window=True),
    "vllm-no-parser": Profile("vllm-no-parser", context=32_768, report_window=True, tool_calls_as_text=True),
    "text-only": Profile("text-only", context=32_768, vision=False),
    "no-tools": Profile("no-tools", context=32_768, tool_calling=False),
}
# the URL path each profile is served under, so the harness's profile detection sees what a user would give it
URL_HINTS = {"openai": "/v1", "openai-strict": "/v1", "anthropic": "", "anthropic-thinking": "",
             "gemini-2.5": "/gemini/v1", "gemini-3": "/gemini/v1", "mistral": "/mistral/v1"}


def png_size(data: str) -> tuple[int, int]:
    raw = base64.b64decode(data[:44])
    return struct.unpack(">II", raw[16:24]) if raw[12:16] == b"IHDR" else (1024, 1024)


def image_cost(rule: str, width: int, height: int) -> int:
    """The fake's own count of one image (see the module docstring for each rule)."""
    if rule == "openai":
        scale = min(1.0, 2048 / max(width, height))
        width, height = width * scale, height * scale
        scale = 768 / min(width, height)
        return 85 + 170 * math.ceil(width * scale / 512) * math.ceil(height * scale / 512)
    if rule == "anthropic":
        scale = min(1.0, 1568 / max(width, height))
        return math.ceil(width * scale * height * scale / 750)
    if rule == "gemini":
        return 1120
    if rule == "mistral":
        scale = min(1.0, 1024 / max(width, height))
        return math.ceil(width * scale / 16) * math.ceil(height * scale / 16) + math.ceil(height * scale / 16)
    return math.ceil(width / 28) * math.ceil(height / 28) + 2


class Refusal(Exception):
    def __init__(self, status: int, body: dict):
        super().__init__(json.dumps(body))
        self.status, self.body = status, body


def openai_error(message: str, code: object = None, kind: str = "invalid_request_error", status: int = 400):
    return Refusal(status, {"error": {"message": message, "type": kind, "param": None, "code": code}})


def vllm_error(message: str):
    return Refusal(400, {"object": "error", "message": message, "type": "BadRequestError", "param": None,
                         "code": 400})


def anthropic_error(message: str, kind: str = "invalid_request_error", status: int = 400):
    return Refusal(status, {"type": "error", "error": {"type": kind, "message": message}})


def _parts(message: dict) -> list[dict]:
    content = message.get("content")
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if isinstance(content, str) else []


def _images(message: dict) -> list[str]:
    """base64 payloads of a wire message (OpenAI image_url parts, Anthropic image blocks, also in tool_result)."""
    found = []
    for part in _parts(message):
        if part.get("type") == "image_url":
            found.append(part["image_url"]["url"].split(",", 1)[1])
        elif part.get("type") == "image":
            found.append(part["source"]["data"])
        elif part.get("type") == "tool_result" and isinstance(part.get("content"), list):
            found += _images({"content": part["content"]})
    return found


STRICT_KEYWORDS = frozenset({"type", "description", "enum", "const", "properties", "required",
                             "additionalProperties", "items", "anyOf", "pattern", "format", "multipleOf", "minimum",
                             "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems", "$ref",
                             "$defs"})


def strict_problem(schema, context: tuple) -> str | None:
    """Why OpenAI strict mode refuses ``schema`` (None: accepted), in its error's words."""
    where = f"In context={context}"
    if not isinstance(schema, dict):
        return f"{where}, schema must be an object."
    if not context and (schema.get("type") != "object" or "anyOf" in schema):
        return f"{where}, the root schema must be an object and not 'anyOf'."
    for key in schema:
        if key not in STRICT_KEYWORDS:
            return f"{where}, '{key}' is not permitted."
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False:
            return f"{where}, 'additionalProperties' is required to be supplied and to be false."
        missing = [name for name in properties if name not in (schema.get("required") or [])]
        if missing or set(schema.get("required") or []) - set(properties):
            return (f"{where}, 'required' is required to be supplied and to be an array including every key in "
                    f"properties. Missing '{(missing or ['?'])[0]}'.")
        for name, item in properties.items():
            if (problem := strict_problem(item, (*context, "properties", name))) is not None:
                return problem
    for key in ("items",):
        if key in schema and (problem := strict_problem(schema[key], (*context, key))) is not None:
            return problem
    for index, option in enumerate(schema.get("anyOf") or []):
        if (problem := strict_problem(option, (*context, "anyOf", str(index)))) is not None:
            return problem
    return None


@dataclass
class RequestStats:
    images: int
    bytes: int
    tokens: int
    max_tokens: int
    dropped: int = 0


@dataclass
class LimitedModelServer:
    """One fake server; ``model(body, profile)`` writes each reply body. ``stats`` and ``refusals`` record every
    request; ``keep_bodies`` keeps the request bodies too (tests)."""

    profile: Profile
    model: object
    keep_bodies: bool = False
    stats: list[RequestStats] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    bodies: list[dict] = field(default_factory=list)

    def __post_init__(self):
        server = self
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server API
                window = server.profile.context if server.profile.report_window else None
                if window and self.path.endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "fake", "max_model_len": window}]})
                elif window and self.path.endswith("/props"):
                    self._send(200, {"default_generation_settings": {"n_ctx": window}})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    body = json.loads(raw)
                    with server.lock:
                        reply = server.handle(body, len(raw))
                    self._send(200, reply)
                except Refusal as refusal:
                    server.refusals.append(json.dumps(refusal.body))
                    self._send(refusal.status, refusal.body)

            def _send(self, status: int, payload: dict):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = QuietServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{URL_HINTS.get(self.profile.name, '/v1')}"

    def __enter__(self) -> LimitedModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # ------------------------------------------------------------------ limits
    def handle(self, body: dict, size: int) -> dict:
        profile = self.profile
        messages = body.get("messages", [])
        if self.keep_bodies:
            self.bodies.append(body)
        images = [data for message in messages for data in _images(message)]
        text = sum(len(json.dumps(m)) for m in messages) - sum(len(d) for d in images)
        text += len(json.dumps(body.get("tools", []))) + len(json.dumps(body.get("system", "")))
        tokens = math.ceil(text / 3.5) + sum(image_cost(profile.image_rule, *png_size(d)) for d in images)
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        stats = RequestStats(len(images), size, tokens, max_tokens)
        self.stats.append(stats)
        self.check(body, images, size, tokens, max_tokens, stats)
        return self.model(body, profile)

    def check(self, body, images, size, tokens, max_tokens, stats) -> None:
        profile = self.profile
        anthropic = profile.wire == "anthropic"
        if images and not profile.vision:
            raise vllm_error("fake-text-model is not a multimodal model")
        if body.get("tools") and not profile.tool_calling:
            raise vllm_error('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')
        if profile.max_images and len(images) > profile.max_images:
            raise (anthropic_error(f"messages: Too many images and documents: {len(images)} > {profile.max_images}")
                   if anthropic else openai_error(f"Too many images in request: {len(images)} > {profile.max_images}"))
        edges = [max(png_size(data)) for data in images]
        if profile.many_images and len(images) > profile.many_images and max(edges) > profile.many_images_edge:
            raise anthropic_error("messages.0.content.0.image.source.base64.data: At least one of the image "
                                  "dimensions exceed max allowed size for many-image requests: 2000 pixels")
        if profile.max_image_edge and edges and max(edges) > profile.max_image_edge:
            raise anthropic_error("image dimensions exceed max allowed size: 8000 pixels")
        if profile.max_image_b64 and any(len(data) > profile.max_image_b64 for data in images):
            raise anthropic_error("image exceeds 5 MB maximum")
        if profile.max_request_bytes and size > profile.max_request_bytes:
            if anthropic:
                raise anthropic_error("Request exceeds the maximum allowed number of bytes.", "request_too_large", 413)
            raise openai_error(f"Request payload size exceeds the limit: {profile.max_request_bytes} bytes.",
                               kind="INVALID_ARGUMENT")
        if profile.thinking_budget and max_tokens <= profile.thinking_budget:
            raise anthropic_error("`max_tokens` must be greater than `thinking.budget_tokens`")
        self.check_history(body)
        if profile.context and tokens + max_tokens > profile.context:
            if profile.drop_oldest:
                stats.dropped = self.drop_oldest(body, tokens + max_tokens - profile.context)
            elif anthropic:
                raise anthropic_error(f"prompt is too long: {tokens} tokens > {profile.context - max_tokens} maximum")
            elif profile.name.startswith("llamacpp"):
                raise Refusal(400, {"error": {"code": 400, "message": "the request exceeds the available context "
                                              "size, try increasing it", "type": "exceed_context_size_error",
                                              "n_prompt_tokens": tokens, "n_ctx": profile.context}})
            elif profile.name.startswith("vllm"):
                raise vllm_error(f"This model's maximum context length is {profile.context} tokens. However, you "
                                 f"requested {tokens + max_tokens} tokens ({tokens} in the messages, {max_tokens} in "
                                 "the completion). Please reduce the length of the messages or completion.")
            else:
                raise openai_error(f"This model's maximum context length is {profile.context} tokens. However, your "
                                   f"messages resulted in {tokens} tokens.", "context_length_exceeded")

    def drop_oldest(self, body: dict, excess: int) -> int:
        dropped = 0
        messages = body["messages"]
        while excess > 0 and len(messages) > 2:
            excess -= math.ceil(len(json.dumps(messages.pop(1))) / 3.5)
            dropped += 1
        return dropped

    def check_history(self, body: dict) -> None:
        """Message-order and round-trip rules of the history sent back, and the tool schema dialect."""
        profile = self.profile
        messages = body.get("messages", [])
        for tool in body.get("tools", []) if profile.strict_tools else []:
            function = tool.get("function") or {}
            problem = "'strict' must be true" if function.get("strict") is not True else strict_problem(
                function.get("parameters"), ())
            if problem:
                raise openai_error(f"Invalid schema for function '{function.get('name')}': {problem}",
                                   "invalid_function_parameters")
        if profile.gemini_schema and "additionalProperties" in json.dumps(body.get("tools", [])):
            raise openai_error('Invalid JSON payload received. Unknown name "additionalProperties" at '
                               "'tools[0].function.parameters': Cannot find field.")
        for index, message in enumerate(messages):
            previous = messages[index - 1] if index else {}
            if not profile.user_after_tool and message.get("role") == "user" and previous.get("role") == "tool":
                raise Refusal(400, {"object": "error", "message": "Unexpected role 'user' after role 'tool'",
                                    "type": "invalid_request_message_order", "param": None, "code": "3230"})
            for call in message.get("tool_calls") or []:
                if profile.strict_history_json:
                    try:
                        json.loads(call["function"]["arguments"])
                    except ValueError:
                        raise vllm_error("Invalid JSON in tool call arguments of the history") from None
                signature = ((call.get("extra_content") or {}).get("google") or {}).get("thought_signature")
                if profile.thought_signatures and signature != f"sig-{call['id']}":
                    raise openai_error("Function call is missing a thought_signature in functionCall parts. This "
                                       "is required for tools to work correctly.", kind="INVALID_ARGUMENT")
            if profile.thinking_budget and message.get("role") == "assistant":
                blocks = message.get("content") or []
                if any(b.get("type") == "tool_use" for b in blocks) and (
                        blocks[0].get("type") != "thinking" or blocks[0].get("signature") != "sig-thinking"):
                    raise anthropic_error("messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, "
                                          "but found `tool_use`. When `thinking` is enabled, a final `assistant` "
                                          "message must start with a thinking block.")


# ---------------------------------------------------------------------------------------------- scripted model
VOLUME = re.compile(r"- (\S+) \(id ")
IMAGE_ID = re.compile(r"img-\d+")
# a line of the conversation policy's list of shortened earlier rounds
SHORTENED_ROUND = re.compile(r"\\n(\d+)\. (?:[a-z_]+ [{\[]|a reply without)")
RADIOLOGY_ANSWER = ("Findings: one enhancing lesion reviewed on several slices.\nKEY_SLICE_AXIAL_MM: 0.0\n"
                    "KEY_SLICE_SAGITTAL_MM: 0.0\nKEY_SLICE_CORONAL_MM: 0.0\nRAS: [0.0, 0.0, 0.0]\nANSWER: A")
PATHOLOGY_ANSWER = "The slide was reviewed at several magnifications.\nANSWER: A"


def _text_of(messages: list[dict]) -> str:
    return json.dumps(messages)


def radiology_round(index: int, conversation: str, offered: frozenset = frozenset()) -> list[tuple[str, dict]]:
    """Two calls per round, as GPT-4o and Claude make unprompted: open, scroll a dozen times, zoom, cine, switch
    series, look up a point on an old image by id, record evidence (with the evidence-capture tools where they are
    ``offered``, else by reading the viewer state back, as the paper's Table 9 toolset allows)."""
    volumes = VOLUME.findall(conversation) or ["missing"]
    ids = IMAGE_ID.findall(conversation)
    view = ("axial", "sagittal", "coronal")[index % 3]
    plan = {
        0: [("select_volume", {"volume_name": volumes[0], "size": 512}), ("observe", {"size": 512})],
        3: [("scroll", {"view": "axial", "direction": "up", "num_slices": 9, "output": "cine", "size": 768}),
            ("zoom", {"view": "axial", "factor": 2.0, "center_1000": [500, 500]})],
        5: [("select_volume", {"volume_name": volumes[-1], "size": 512}),
            ("image_coords_to_ras", {"view": "axial", "point_1000": [480, 520],
                                     **({"image_id": ids[0]} if ids else {})})],
        8: [("record_key_slices", {"axial_mm": 0.0, "sagittal_mm": 0.0, "coronal_mm": 0.0}),
            ("bookmark_view", {"view": "axial", "label": "lesion"})] if "record_key_slices" in offered else
           [("get_viewer_state", {}), ("get_slice_offset_range", {"view": "axial"})],
    }
    return plan.get(index, [("scroll", {"view": view, "direction": "up" if index % 2 else "down", "num_slices": 2,
                                        "size": 512}),
                            ("observe", {"view": view, "size": 512})])


def pathology_round(index: int) -> list[tuple[str, dict]]:
    plan = [("zoom", {"amount": 2, "unit": "factor", "direction": "in", "x": 500, "y": 500}),
            ("pan", {"direction": ("left", "right", "up", "down")[index % 4], "amount": 0.3}),
            ("capture_viewer", {"label": f"field {index}"})]
    return [plan[index % 3], plan[(index + 1) % 3]]


@dataclass
class ScriptedVLM:
    """Plays GPT-4o / Claude: ``rounds`` tool rounds of two calls, then the answer. Stateless per request (the
    round is the number of assistant turns in the history, plus the earlier rounds the conversation policy
    listed in one line each). ``quirks``: ``truncated`` (round 2's first call is cut
    at max_tokens), ``empty`` (round 4's reply is empty), ``answer_turn_call`` (a tool call on the answer turn),
    ``reasoning_answer`` (the answer only in reasoning_content)."""

    rounds: int = 20
    quirks: frozenset = frozenset()
    state: dict = field(default_factory=dict)

    def __call__(self, body: dict, profile: Profile) -> dict:
        messages = body.get("messages", [])
        assistant = [m for m in messages if m.get("role") == "assistant"
                     and m.get("content") not in ("(tool results received)",)]
        conversation = _text_of(messages)
        shortened = [int(number) for number in SHORTENED_ROUND.findall(conversation)]  # rounds no longer shown
        index = max(shortened, default=0) + len([m for m in assistant if m.get("tool_calls") or any(
            b.get("type") == "tool_use" for b in (m.get("content") if isinstance(m.get("content"), list) else []))])
        pathology = any(t.get("name", t.get("function", {}).get("name")) == "capture_viewer"
                        for t in body.get("tools", []))
        preflight = any((t.get("function") or t).get("name") == "report_colour" for t in body.get("tools", []))
        answer_turn = body.get("tool_choice") in ("none", {"type": "none"}) or not body.get("tools")
        if preflight:
            return self.reply(profile, "", [("report_colour", {"colour": "red"})], "pre")
        if answer_turn or index >= self.rounds:
            if "answer_turn_call" in self.quirks and not self.state.get("answer_call"):
                self.state["answer_call"] = True
                return self.reply(profile, "", [("observe", {"size": 256})], index)
            text = PATHOLOGY_ANSWER if pathology else RADIOLOGY_ANSWER
            if "reasoning_answer" in self.quirks:
                return self.reply(profile, "", [], index, reasoning=text)
            return self.reply(profile, text, [], index)
        if "empty" in self.quirks and index == 4 and not self.state.get("empty"):
            self.state["empty"] = True
            return self.reply(profile, "", [], index)
        offered = frozenset((t.get("function") or t).get("name") for t in body.get("tools", []))
        calls = pathology_round(index) if pathology else radiology_round(index, conversation, offered)
        if profile.strict_tools:  # strict mode: every property, null for those not given
            schemas = {t["function"]["name"]: t["function"]["parameters"] for t in body.get("tools", [])}
            calls = [(name, {**dict.fromkeys((schemas.get(name) or {}).get("properties") or {}), **arguments})
                     for name, arguments in calls]
        cut = "truncated" in self.quirks and index == 2 and not self.state.get("cut")
        self.state["cut"] = self.state.get("cut") or cut
        return self.reply(profile, "", calls, index, cut=cut)

    def reply(self, profile: Profile, text: str, calls: list, index, reasoning: str = "", cut: bool = False):
        if profile.wire == "anthropic":
            content = [{"type": "thinking", "thinking": "plan the next step", "signature": "sig-thinking"}] \
                if profile.thinking_budget else []
            content += [{"type": "text", "text": text}] if text else []
            content += [{"type": "tool_use", "id": f"toolu_{index}_{i}", "name": name, "input": args}
                        for i, (name, args) in enumerate(calls)]
            return {"id": f"msg_{index}", "type": "message", "role": "assistant", "content": content,
                    "stop_reason": "tool_use" if calls else "end_turn",
                    "usage": {"input_tokens": 100, "output_tokens": 40, "cache_read_input_tokens": 0,
                              "cache_creation_input_tokens": 0}}
        message: dict = {"role": "assistant", "content": text or None}
        if reasoning:
            message["reasoning_content"] = reasoning
        if calls and profile.tool_calls_as_text:
            message["content"] = "".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>"
                                         for n, a in calls)
        elif calls:
            message["tool_calls"] = []
            for i, (name, args) in enumerate(calls):
                call_id = f"call_{index}_{i}"
                arguments = json.dumps(args)
                call = {"id": call_id, "type": "function",
                        "function": {"name": name, "arguments": arguments[:len(arguments) // 2] if cut and not i
                                     else arguments}}
                if profile.thought_signatures:
                    call["extra_content"] = {"google": {"thought_signature": f"sig-{call_id}"}}
                message["tool_calls"].append(call)
        finish = "length" if cut else ("tool_calls" if calls else "stop")
        return {"id": f"chatcmpl-{index}", "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 40}}

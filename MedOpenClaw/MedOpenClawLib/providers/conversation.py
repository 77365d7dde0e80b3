"""The conversation policy: which part of an episode's history a request carries, recorded with every run.

The episode keeps the whole neutral conversation (the trace needs it); each request sends a *view* of it:

- the last K images (``--image-history K``; ``all`` sends every image, as before) -- older images are replaced by
  a one-line stub naming view, offset and image id, and since the viewer keeps the geometry of every image id,
  0..999 arguments that name an old image keep working;
- images are dropped in chunks (K to K + chunk - 1 are kept), so the request prefix stays byte-identical for
  several rounds and the servers' prompt caches keep hitting;
- the request budget (:func:`fit`) then trims further until the request fits the server's documented limits:
  oldest images first, then the text of old tool outputs and observations, then every image, and at last the
  oldest whole rounds.

Nothing here changes what the model is asked or told; the task is sent once, in the first user message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from .http import ProviderError
from .limits import MESSAGE_OVERHEAD_TOKENS, RequestEstimate, ServerLimits, image_tokens, over_limit, text_tokens
from .messages import Message

DEFAULT_IMAGE_HISTORY = 6  # with the chunk below at most 8 images per request: inside every profile's limits
IMAGE_CHUNK = 3
SQUEEZE_IMAGES = (None, 2, 0)  # images kept after 0, 1, 2 refusals for length (None: the policy's own)


def parse_image_history(text: str) -> int | None:
    """``--image-history``: a whole number of images >= 1, or ``all`` (None)."""
    if text.strip().lower() == "all":
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"--image-history takes a number of images >= 1 or 'all', not {text!r}")
    return int(text)


@dataclass(frozen=True)
class ConversationPolicy:
    image_history: int | None = DEFAULT_IMAGE_HISTORY  # None: every image, every request
    chunk: int = IMAGE_CHUNK

    def kept(self, total: int) -> int:
        """How many of ``total`` images a request carries before any budget trimming."""
        if self.image_history is None or total <= self.image_history:
            return total
        return total - ((total - self.image_history) // self.chunk) * self.chunk

    def to_json(self) -> dict:
        return {"image_history": "all" if self.image_history is None else self.image_history, "chunk": self.chunk}


class ContextBudgetError(ProviderError):
    """Even the most compact view of the conversation exceeds the server's limits (the task alone is too long)."""

    def __init__(self, message: str):
        super().__init__(message, length=True)


def _elidable(messages: list[Message]) -> list[int]:
    """Indices of texts that may be elided, oldest first: tool outputs and observations before the latest model
    turn (the system prompt, the task -- the first user message -- and the latest round are never elided)."""
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), -1)
    return [i for i, m in enumerate(messages[:last_assistant])
            if (m.role == "tool" or (m.role == "user" and i != first_user)) and m.text]


def _rounds(messages: list[Message]) -> list[tuple[int, int]]:
    """``[start, end)`` of every round before the latest one: a model turn and the results and observations after
    it (the system prompt and the task before the first model turn are not a round)."""
    starts = [i for i, message in enumerate(messages) if message.role == "assistant"]
    return [(start, end) for start, end in zip(starts, starts[1:])]


def drop_rounds(messages: list[Message], count: int) -> list[Message]:
    """The last resort of the budget: the oldest ``count`` whole rounds left out (a call never loses its result),
    with one line in the task saying so."""
    rounds = _rounds(messages)[:count]
    if not rounds:
        return messages
    first, last = rounds[0][0], rounds[-1][1]
    task = next((i for i, m in enumerate(messages[:first]) if m.role == "user"), None)
    note = f"[rounds 1-{len(rounds)} of this episode are not shown: they do not fit the server's context window]"
    head = [replace(m, text=f"{m.text}\n{note}") if i == task else m for i, m in enumerate(messages[:first])]
    return head + messages[last:]


def compact(messages: list[Message], keep_images: int, elide: int = 0) -> list[Message]:
    """A view of ``messages`` with only the newest ``keep_images`` images and the oldest ``elide`` elidable texts
    replaced by short notes; the messages themselves are not changed."""
    positions = [(i, j) for i, message in enumerate(messages) for j in range(len(message.images))]
    dropped = set(positions[: max(len(positions) - keep_images, 0)])
    elided = set(_elidable(messages)[:elide])
    view = []
    for i, message in enumerate(messages):
        if not any((i, j) in dropped for j in range(len(message.images))) and i not in elided:
            view.append(message)
            continue
        text = message.text
        if i in elided:
            what = "tool output" if message.role == "tool" else "observation"
            text = f"[{len(text)} characters of this {what} elided to fit the server's context window]"
        stubs = [image.stub() for j, image in enumerate(message.images) if (i, j) in dropped]
        kept = [image for j, image in enumerate(message.images) if (i, j) not in dropped]
        view.append(replace(message, text="\n".join([text, *stubs]) if text else "\n".join(stubs), images=kept))
    return view


def estimate(messages: list[Message], tools_chars: int, rule: str) -> RequestEstimate:
    """A conservative estimate of the request a provider builds from ``messages`` (see :mod:`.limits`)."""
    result = RequestEstimate()
    characters = tools_chars
    for message in messages:
        characters += len(message.text) + sum(len(call.name) + len(call.raw_arguments or "") + 40
                                              for call in message.tool_calls)
        result.tokens += MESSAGE_OVERHEAD_TOKENS
        for image in message.images:
            width, height = image.size()
            result.images += 1
            result.tokens += image_tokens(rule, width, height)
            result.bytes += len(image.png_base64) + 80
            result.largest_edge = max(result.largest_edge, width, height)
            result.largest_image_b64 = max(result.largest_image_b64, len(image.png_base64))
    result.tokens += text_tokens(characters)
    result.bytes += int(characters * 1.2) + 200 * len(messages)
    return result


def fit(messages: list[Message], tools: list[dict], limits: ServerLimits, max_tokens: int,
        policy: ConversationPolicy, squeeze: int = 0) -> tuple[list[Message], dict]:
    """The view of ``messages`` a request may carry: the policy's images, then trimmed until the estimate is
    inside ``limits`` (raises :class:`ContextBudgetError` when nothing is left to trim). ``squeeze`` > 0 after the
    server refused a request for its length: fewer images, and every old output elided."""
    total = sum(len(message.images) for message in messages)
    keep = policy.kept(total)
    cap = SQUEEZE_IMAGES[min(squeeze, len(SQUEEZE_IMAGES) - 1)]
    if cap is not None:
        keep = min(keep, cap)
    elidable = len(_elidable(messages))
    elide = elidable if squeeze else 0
    rounds, dropped = len(_rounds(messages)), 0
    tools_chars = len(json.dumps(tools)) if tools else 0
    while True:
        view = drop_rounds(compact(messages, keep, elide), dropped)
        request = estimate(view, tools_chars, limits.image_rule)
        problem = over_limit(request, limits, max_tokens)
        if problem is None:
            return view, {**request.to_json(), "images_stubbed": total - keep, "texts_elided": elide,
                          "rounds_dropped": dropped, "squeeze": squeeze}
        if keep > 1:
            keep -= 1
        elif elide < elidable:
            elide += 1
        elif keep > 0:
            keep = 0
        elif dropped < rounds:
            dropped += 1
        else:
            raise ContextBudgetError(f"the conversation cannot be made to fit: {problem}")

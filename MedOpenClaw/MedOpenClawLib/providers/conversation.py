"""The conversation policy: which part of an episode's history a request carries, recorded with every run.

The episode keeps the whole neutral conversation (the trace needs it); each request sends a *view* of it:

- images: the newest K (``--image-history K``), and every image of the latest round even when it brought more
  (the model has not seen those yet); an older image becomes a one-line stub naming image id, view and offset, and since
  the viewer keeps the geometry of every image id, 0..999 arguments naming an old image keep working. This cut
  moves every round, but only through the latest rounds;
- rounds: the latest round and the N finished ones before it stay whole (``--tool-history N``); older rounds are
  shortened to one line each, listed in the task: the calls the model made and a stub of each result (ok or error
  code, the few fields that name what was looked at, its image ids). Their superseded viewer state summaries
  (pathology, MedFlow-Bench App. H.4: every round brings the current one) and the model's text are left out.
  Rounds are shortened only at drop points, every ``DROP_EVERY`` rounds, so in between the prefix up to the
  latest rounds stays byte-identical and the servers' prompt caches keep hitting;
- ``all`` for both sends every image and every round whole, as before the policy;
- the request budget (:func:`fit`) then trims further until the request fits the server's documented limits:
  oldest images first, then the text of old tool outputs and observations, then every image, and at last the
  oldest whole rounds.

Nothing here changes what the model is asked or told; the task is sent once, in the first user message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace

from .http import ProviderError, encoded_size
from .limits import MESSAGE_OVERHEAD_TOKENS, RequestEstimate, ServerLimits, image_tokens, over_limit, text_tokens
from .messages import Message

# the defaults, measured by scripts/bench_model_traffic.py (bench/model_traffic.json): a 20-round episode of every
# module inside every server profile's limits, and the fewest tokens sent for what the model still sees
DEFAULT_IMAGE_HISTORY = 2  # the newest images a request carries (the latest round's always, even more of them)
DEFAULT_TOOL_HISTORY = 1  # finished rounds kept whole at each drop point (plus the latest round, always)
DROP_EVERY = 3  # rounds between drop points: in between, the shortened rounds (the cached prefix) stay as they are
# the data fields an old output's stub keeps: what names the thing looked at, never geometry or measurements
STUB_FIELDS = ("view", "offset_mm", "offset", "volume", "volume_name", "volume_id", "name", "node_id", "slide",
               "level", "layer", "segment", "label", "status")
STUB_VALUE_CHARS = 80
SQUEEZE_IMAGES = (None, 2, 0)  # images kept after 0, 1, 2 refusals for length (None: the policy's own)


@dataclass(frozen=True)
class ConversationPolicy:
    """What a request carries of the history (see the module docstring); recorded in run.json."""

    image_history: int | None = DEFAULT_IMAGE_HISTORY  # None: every image, every request
    tool_history: int | None = DEFAULT_TOOL_HISTORY  # None: every tool output whole, every request
    drop_every: int = DROP_EVERY

    def drop_point(self, finished: int) -> int:
        """The finished-round count of the latest drop point."""
        return finished - finished % self.drop_every

    def old_rounds(self, finished: int) -> int:
        """Of ``finished`` rounds, how many oldest ones are shortened to one line each: at the latest drop point,
        all but the newest ``tool_history``."""
        if self.tool_history is None:
            return 0
        return max(self.drop_point(finished) - self.tool_history, 0)

    def to_json(self) -> dict:
        return {"image_history": "all" if self.image_history is None else self.image_history,
                "tool_history": "all" if self.tool_history is None else self.tool_history,
                "drop_every": self.drop_every}


def tool_stub(message: Message) -> str:
    """What an old tool output shrinks to (in :func:`round_line`): enough to stay oriented (whether it worked,
    which view, offset, image or volume), none of the data the model has already read."""
    result = message.result
    if result is None:
        try:
            result = json.loads(message.text)
        except ValueError:
            result = {}
    result = result if isinstance(result, dict) else {}
    error = result.get("error") if isinstance(result.get("error"), dict) else {}
    parts = ["ok" if result.get("ok") else f"error {error.get('code') or ''}".strip()]
    data = result.get("data") if isinstance(result.get("data"), dict) else {}
    parts += [f"{key}={str(data[key])[:STUB_VALUE_CHARS]}" for key in STUB_FIELDS
              if isinstance(data.get(key), (str, int, float, bool))]
    described = [image for image in result.get("images") or [] if isinstance(image, dict)]
    if message.images:  # one short name per image (the viewer keeps their geometry for 0..999 arguments)
        parts.append("images " + ", ".join(image.name() for image in message.images))
    elif any(image.get("image_id") for image in described):  # what the output described, not in the history
        parts.append("images " + ", ".join(image["image_id"] for image in described if image.get("image_id")))
    return "; ".join(parts)


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


def _without_rounds(messages: list[Message], count: int, note: str) -> list[Message]:
    """``messages`` without their oldest ``count`` whole rounds (a call never loses its result), ``note`` added to
    the task (the first user message) in their place."""
    rounds = _rounds(messages)[:count]
    if not rounds:
        return messages
    first, last = rounds[0][0], rounds[-1][1]
    task = next((i for i, m in enumerate(messages[:first]) if m.role == "user"), None)
    head = [replace(m, text=f"{m.text}\n{note}") if i == task else m for i, m in enumerate(messages[:first])]
    return head + messages[last:]


def drop_rounds(messages: list[Message], count: int) -> list[Message]:
    """The last resort of the budget: the oldest ``count`` rounds left out, with one line in the task saying so."""
    return _without_rounds(messages, count, f"[{count} more rounds of this episode are not shown: they do not fit "
                                            "the server's context window]")


def round_line(messages: list[Message]) -> str:
    """One old round in one line: each call the model made and a stub of its result (the model's text and the
    round's superseded observation are left out)."""
    turn, results = messages[0], {m.tool_call_id: m for m in messages if m.role == "tool"}
    calls = []
    for call in turn.tool_calls:
        arguments = (call.raw_arguments or "")[:STUB_VALUE_CHARS] if call.arguments is None else \
            json.dumps(call.arguments, separators=(",", ":"), sort_keys=True, default=str)
        result = results.get(call.id)
        calls.append(f"{call.name} {arguments} -> {tool_stub(result) if result else 'no result'}")
    return "; ".join(calls) or "a reply without tool calls"


def collapse(messages: list[Message], count: int) -> list[Message]:
    """The oldest ``count`` rounds shortened to one line each (:func:`round_line`), listed in the task."""
    rounds = _rounds(messages)[:count]
    if not rounds:
        return messages
    lines = [f"{number}. {round_line(messages[start:end])}" for number, (start, end) in enumerate(rounds, 1)]
    return _without_rounds(messages, count, "Earlier rounds, shortened (their image ids stay valid):\n"
                                            + "\n".join(lines))


def image_cut(messages: list[Message], policy: ConversationPolicy) -> int:
    """How many of the oldest images the policy leaves out: all but the newest ``image_history``, and never one
    the model has not seen yet (the latest round's; before its first turn, every image: a Track C montage request
    carries one image per series). The cut moves every round, but only through the latest rounds, so the cached
    prefix before them survives."""
    if policy.image_history is None:
        return 0
    latest = max((i for i, message in enumerate(messages) if message.role == "assistant"), default=0)
    seen = sum(len(message.images) for message in messages[:latest])
    return min(max(sum(len(message.images) for message in messages) - policy.image_history, 0), seen)


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


class EncodedSizes:
    """:func:`.http.encoded_size` of each text, remembered for one :func:`fit` (whose trimming loop estimates the
    same texts again and again; a dict keyed by the text keeps them alive only that long)."""

    def __init__(self):
        self.sizes: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        size = self.sizes.get(text)
        if size is None:
            size = self.sizes[text] = encoded_size(text)
        return size


def estimate(messages: list[Message], tools_chars: int, rule: str,
             encoded: Callable[[str], int] = encoded_size) -> RequestEstimate:
    """A conservative estimate of the request a provider builds from ``messages`` (see :mod:`.limits`): tokens
    from characters, bytes from each text as the body encodes it (``tools_chars`` is already encoded JSON)."""
    result = RequestEstimate()
    characters = tools_chars
    result.bytes += tools_chars
    for message in messages:
        calls = [(call.name, call.raw_arguments or "") for call in message.tool_calls]
        characters += len(message.text) + sum(len(name) + len(arguments) + 40 for name, arguments in calls)
        result.bytes += encoded(message.text) + sum(encoded(name) + encoded(arguments) + 40
                                                    for name, arguments in calls)
        result.tokens += MESSAGE_OVERHEAD_TOKENS
        for image in message.images:
            width, height = image.size()
            result.images += 1
            result.tokens += image_tokens(rule, width, height)
            result.bytes += len(image.png_base64) + 80
            result.largest_edge = max(result.largest_edge, width, height)
            result.largest_image_b64 = max(result.largest_image_b64, len(image.png_base64))
    result.tokens += text_tokens(characters)
    result.bytes += 200 * len(messages)
    return result


def fit(messages: list[Message], tools: list[dict], limits: ServerLimits, max_tokens: int,
        policy: ConversationPolicy, squeeze: int = 0) -> tuple[list[Message], dict]:
    """The view of ``messages`` a request may carry: the policy's images, then trimmed until the estimate is
    inside ``limits`` (raises :class:`ContextBudgetError` when nothing is left to trim). ``squeeze`` > 0 after the
    server refused a request for its length: fewer images, and every old output elided. The policy's part only
    changes at drop points (see :class:`ConversationPolicy`); the budget's trimming may change every request."""
    images = sum(len(message.images) for message in messages)
    old = policy.old_rounds(len(_rounds(messages)))
    keep = images - image_cut(messages, policy)
    messages = collapse(messages, old)  # their images go with them (named in their lines)
    keep = min(keep, sum(len(message.images) for message in messages))
    cap = SQUEEZE_IMAGES[min(squeeze, len(SQUEEZE_IMAGES) - 1)]
    if cap is not None:
        keep = min(keep, cap)
    elidable = len(_elidable(messages))
    elide = elidable if squeeze else 0
    rounds, dropped = len(_rounds(messages)), 0
    tools_chars = encoded_size(tools) if tools else 0
    encoded = EncodedSizes()
    while True:
        view = drop_rounds(compact(messages, keep, elide), dropped)
        request = estimate(view, tools_chars, limits.image_rule, encoded)
        problem = over_limit(request, limits, max_tokens)
        if problem is None:
            return view, {**request.to_json(), "images_stubbed": images - keep,
                          "rounds_shortened": old, "texts_elided": elide,
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

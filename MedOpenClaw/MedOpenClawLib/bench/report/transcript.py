"""An episode's audit trace as a transcript, in the spirit of inspect_ai's log viewer: the set-up steps, the prompt,
then one entry per model turn -- its text (and reasoning, when the provider returned it), tokens and latency,
every tool call with its arguments, status, error, the data the tool returned and its images -- and the end.

Built only from trace records (``episode_prompt``, ``model_output``, ``action``, ``tool_receipt``,
``episode_end``); an action record and its tool receipt are joined by the call id. Long texts are cut at
:data:`TEXT_LIMIT` characters so pages of hundreds of episodes stay quick to open; the trace keeps everything.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ...core.audit import sha256_file
from ..package import place_file
from .runs import _mapping

TEXT_LIMIT = 12000


def clipped(text: str, limit: int = TEXT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters in the trace)"


def pretty(value) -> str:
    """JSON as a person reads it (indented, keys sorted), cut at :data:`TEXT_LIMIT`."""
    return clipped(json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False, default=str))


def compact(value) -> str:
    """Tool-call arguments on one line, as the model wrote them (keys sorted), cut at :data:`TEXT_LIMIT`."""
    return clipped(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str))


@dataclass
class Step:
    """One viewer action: the agent's tool call (with its receipt) or a step of the harness (actor system)."""

    name: str
    actor: str
    arguments: str
    status: str  # ok | error | not executed
    error: str = ""
    data: str = ""
    feedback: str = ""  # the text the model was sent back
    images: list[dict] = field(default_factory=list)
    duration_ms: float | None = None
    seq: object = None


@dataclass
class Turn:
    number: int
    round: object
    text: str
    reasoning: str
    stop_reason: str
    usage: str  # "" where nothing was recorded (offline agents make no model calls)
    latency: str
    tools_allowed: bool
    steps: list[Step] = field(default_factory=list)
    final: bool = False
    seq: object = None  # the model_output record's place in the trace (findings link to it)


def reasoning_of(raw) -> str:
    """The model's reasoning when the provider returned it: OpenAI-compatible ``reasoning_content`` /
    ``reasoning`` (vLLM, DeepSeek, OpenRouter), Anthropic ``thinking`` blocks."""
    if isinstance(raw, dict):
        for key in ("reasoning_content", "reasoning"):
            if isinstance(raw.get(key), str) and raw[key].strip():
                return raw[key]
        return ""
    if isinstance(raw, list):
        parts = []
        for block in raw:
            if isinstance(block, dict) and block.get("type") == "thinking" and isinstance(block.get("thinking"), str):
                parts.append(block["thinking"])
            elif isinstance(block, dict) and block.get("type") == "redacted_thinking":
                parts.append("[reasoning withheld by the provider]")
        return "\n\n".join(parts)
    return ""


def usage_text(usage: dict) -> tuple[str, str]:
    """(tokens, latency) of one model call; empty where no model was called."""
    if not usage.get("calls") and not usage.get("input_tokens") and not usage.get("output_tokens"):
        return "", ""
    tokens = f"{int(usage.get('input_tokens') or 0)} in / {int(usage.get('output_tokens') or 0)} out"
    extras = [f"{int(usage[key])} {label}" for key, label in (("reasoning_tokens", "reasoning"),
                                                              ("cache_read_tokens", "cached")) if usage.get(key)]
    if extras:
        tokens += " (" + ", ".join(extras) + ")"
    if usage.get("retries"):
        tokens += f" · {int(usage['retries'])} retries"
    seconds = usage.get("model_seconds")
    return tokens, f"{seconds:.1f} s" if isinstance(seconds, (int, float)) and seconds else ""


def copy_images(record: dict, folder: Path, images: Path, page: Path) -> list[dict]:
    """The images of an action record, placed in the report's ``images`` folder under the SHA-256 of their
    bytes, so the report holds each distinct image once (episodes of a cohort show the same views again and
    again); only files inside the trace's own folder (a record naming another file never brings that file into
    the report)."""
    shown = []
    for image in _mapping(record.get("result")).get("images") or []:
        if not isinstance(image, dict) or not isinstance(image.get("path"), str):
            continue
        source = (folder / image["path"]).resolve()
        if folder not in source.parents or not source.is_file():
            continue
        target = images / f"{sha256_file(source)}.png"
        if not target.exists():
            place_file(source, target)
        shown.append({"src": Path(os.path.relpath(target, page.parent)).as_posix(), "view": image.get("view"),
                       "title": f"{image.get('view')} {image.get('width')}x{image.get('height')}"
                                f" @ {image.get('slice_offset_mm')} mm"})
    return shown


def _error_text(error) -> str:
    error = _mapping(error)
    return f"{error.get('code')}: {error.get('message', '')}" if error else ""


def action_step(record: dict, folder: Path, images: Path, page: Path) -> Step:
    result = _mapping(record.get("result"))
    duration = record.get("duration_ms")
    return Step(name=str(record.get("action")), actor=str(record.get("actor")),
                arguments=compact(record.get("arguments")), status=str(record.get("status", "")),
                error=_error_text(record.get("error")),
                data=pretty(result["data"]) if result.get("data") not in (None, {}) else "",
                images=copy_images(record, folder, images, page),
                duration_ms=duration if isinstance(duration, (int, float)) else None, seq=record.get("seq"))


def receipt_step(receipt: dict, action: Step | None) -> Step:
    """A tool call as the model made it, joined with the action it ran (none when it was refused unrun)."""
    arguments = receipt.get("arguments") if receipt.get("arguments") is not None else receipt.get("raw_arguments")
    step = action or Step(name=str(receipt.get("name")), actor="agent", arguments="", status="")
    step.arguments = compact(arguments)
    step.feedback = clipped(str(receipt.get("feedback") or ""))
    if not receipt.get("dispatched", True):
        step.status = "not executed"
    elif not step.status:
        step.status = str(receipt.get("status", ""))
    step.error = step.error or _error_text(receipt.get("error"))
    return step


def transcript(records: list[dict], trace: Path | None, images: Path, page: Path) -> dict:
    """Template variables: ``setup`` (harness steps before the prompt), ``prompt``, ``turns``, ``end``."""
    folder = trace.parent.resolve() if trace is not None else Path()
    setup: list[Step] = []
    turns: list[Turn] = []
    prompt = end = None
    actions: dict[str, Step] = {}
    for record in records:
        kind, payload = record.get("kind"), _mapping(record.get("payload"))
        if kind == "episode_prompt":
            prompt = {"system": clipped(str(payload.get("system", ""))), "user": clipped(str(payload.get("user", ""))),
                      "tools": [str(name) for name in payload.get("tools") or []],
                      "images": len(payload.get("images") or [])}
        elif kind == "model_output":
            tokens, latency = usage_text(_mapping(payload.get("usage")))
            turns.append(Turn(number=len(turns) + 1, round=payload.get("round"), text=clipped(str(payload.get("text")
                              or "")), reasoning=clipped(reasoning_of(payload.get("raw"))),
                              stop_reason=str(payload.get("stop_reason") or ""), usage=tokens, latency=latency,
                              tools_allowed=bool(payload.get("tools_allowed", True)),
                              final=not payload.get("tool_calls") or not payload.get("tools_allowed", True),
                              seq=record.get("seq")))
        elif kind == "action":
            step = action_step(record, folder, images, page)
            call_id = _mapping(record.get("extra")).get("call_id")
            if record.get("actor") == "agent" and call_id is not None:
                actions[str(call_id)] = step  # shown when its receipt arrives, in the order the model called
            elif turns:
                turns[-1].steps.append(step)  # the harness acting between turns (e.g. a round's observation)
            else:
                setup.append(step)
        elif kind == "tool_receipt" and turns:
            turns[-1].steps.append(receipt_step(payload, actions.pop(str(payload.get("call_id")), None)))
        elif kind == "episode_end":
            end = payload
    return {"setup": setup, "prompt": prompt, "turns": turns, "end": end_summary(end)}


def end_summary(end: dict | None) -> list[tuple[str, str]]:
    """How the episode ended, as (label, value) pairs."""
    if not end:
        return []
    rows = [("status", str(end.get("status", "?")))]
    if end.get("error"):
        error = _mapping(end["error"])
        rows.append(("error", str(error.get("message") or error)))
    rows.append(("rounds", str(end.get("rounds", "?")) + (" (budget exhausted)" if end.get("budget_exhausted")
                                                           else "")))
    rows.append(("tool calls", f"{end.get('tool_calls', 0)} ({end.get('failed_calls', 0)} failed, "
                               f"{end.get('rejected_calls', 0)} not executed)"))
    tokens, latency = usage_text(_mapping(end.get("usage")))
    if tokens:
        rows.append(("model usage", tokens + (f" · {latency} waiting on the model" if latency else "")))
    if isinstance(end.get("wall_seconds"), (int, float)):
        rows.append(("wall time", f"{end['wall_seconds']:.1f} s"))
    return rows


def _option_text(value, options: dict[str, str]) -> str:
    """A recorded answer with its option: 'B · Oligodendroglioma / Astrocytoma' (a letter), 'B · PB' (a label)."""
    if value is None:
        return "—"
    text = str(value)
    if text in options:
        return f"{text} · {options[text]}" if options[text] != text else text
    letter = next((letter for letter, label in options.items() if label == text), None)
    return f"{letter} · {text}" if letter else text


def _number_text(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_number_text(item) for item in value) + "]"
    return f"{value:.2f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else \
        ("—" if value is None else str(value))


def answer_rows(case, truth, parsed: dict) -> list[dict]:
    """The final answer beside the correct one, field by field: each question, each yes/no evidence field,
    and the localization the reference gives (key slices and RAS point, or the regions' reference points)."""
    given = parsed.get("answers") if isinstance(parsed.get("answers"), dict) else parsed
    questions = {question.qid: question for question in (case.questions if case is not None else [])}
    rows = []
    for key, correct in truth.answers.items():
        question = questions.get(key)
        options = dict(question.options) if question is not None else {}
        answer = given.get(key)
        same = answer is not None and _option_text(answer, options) == _option_text(correct, options)
        rows.append({"field": question.text if question is not None else key, "answer": _option_text(answer, options),
                     "correct": _option_text(correct, options), "match": same})
    evidence = _mapping(parsed.get("evidence"))
    for name, correct in truth.evidence_fields.items():
        answer = evidence.get(name)
        rows.append({"field": name.replace("_", " "), "answer": _number_text(answer), "correct": _number_text(correct),
                     "match": answer == correct if correct is not None else None})
    localization = _mapping(truth.localization)
    reference_slices = _mapping(localization.get("reference_key_slices"))
    for view, correct in reference_slices.items():
        rows.append({"field": f"{view} key slice (mm)", "answer": _number_text(evidence.get(f"key_slice_{view}_mm")),
                     "correct": _number_text(correct) + " (reference)", "match": None})
    if localization.get("reference_ras") is not None:
        rows.append({"field": "RAS point (mm)", "answer": _number_text(evidence.get("ras")),
                     "correct": _number_text(localization["reference_ras"]) + " (reference)", "match": None})
    points = [region.get("reference_point") for region in truth.regions if region.get("kind") != "exclusion"]
    if points:
        rows.append({"field": "localizations (slide px)", "answer": _number_text(parsed.get("localizations") or None),
                     "correct": _number_text([point for point in points if point]) + " (region reference points)",
                     "match": None})
    return rows

"""Replays a recorded episode: each step returns the next model output stored in an audit trace's receipts.

Re-running a model's recorded outputs against a fresh viewer reproduces the episode without the model (no
cost, no drift), so a result can be audited or re-scored after a harness change; tool results come from the
new viewer, and a divergence from the recording is visible in the new trace.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...core.audit import read_trace
from ...providers.messages import Message, ModelReply, ToolCall
from .base import Agent


def recorded_outputs(trace_path: str | Path) -> list[dict]:
    """The ``model_output`` receipts of a trace, in order."""
    return [record["payload"] for record in read_trace(trace_path) if record.get("kind") == "model_output"]


def episode_trace(run_dir: str | Path, episode_id: str) -> Path:
    """The trace of a finished episode of an earlier ``bench run`` (its last attempt)."""
    result = Path(run_dir) / "episodes" / episode_id / "result.json"
    try:
        trace = json.loads(result.read_text(encoding="utf-8")).get("trace")
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"no recorded episode {episode_id} in {run_dir}: {error}") from error
    if not trace:
        raise ValueError(f"episode {episode_id} in {run_dir} has no trace (it was INVALID)")
    return Path(run_dir) / trace


class ReplayAgent(Agent):
    name = "replay"

    def __init__(self, outputs: list[dict], source: str = ""):
        self.outputs = outputs
        self.source = source

    def reset(self, context) -> None:
        super().reset(context)
        self.position = 0

    def step(self, conversation: list[Message], allow_tools: bool = True) -> ModelReply:
        if self.position >= len(self.outputs):
            return ModelReply(text="", raw={"replay": self.source, "note": "the recording has no more outputs"})
        output = self.outputs[self.position]
        self.position += 1
        calls = [
            ToolCall(id=call["id"], name=call["name"], arguments=call.get("arguments"),
                     raw_arguments=call.get("raw_arguments", ""), parse_error=call.get("parse_error"),
                     repair=call.get("repair"))
            for call in output.get("tool_calls", [])
        ]
        return ModelReply(text=output.get("text") or "", tool_calls=calls,
                          raw={"replay": self.source, "index": self.position - 1, "recorded": output.get("raw")},
                          stop_reason=output.get("stop_reason"), refusal=output.get("refusal"))

    def describe(self) -> dict:
        return {"name": self.name, "source": self.source}

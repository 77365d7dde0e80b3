"""What one short scripted episode costs on the wire, per provider, against a scripted server of each surface
(Testing/Python/providers/test_bench_run_providers.py: replies built from the vendors' SDK types, every request
validated against their request types) -> the ``providers`` entry of ``bench/model_traffic.json``.

Gemini's two surfaces are served by Testing/Python/gemini_server.py's fake (google-genai's types). Per provider,
``bench run --agent model`` as a user types it on one NSCLC case: the pre-flight's tool call, then the
answer, through that vendor's SDK client. Measured: the requests the server received, the bytes each way (request
bodies as they arrived, reply bodies as served), the client's seconds per model call (the trace's ``model_seconds``,
transport and parsing included; the fake answers at once) and the wall time of the whole command (start-up,
pre-flight, episode, scoring, report files).

    python scripts/bench_provider_traffic.py [--out bench/model_traffic.json] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "MedOpenClaw"))
sys.path.insert(0, str(ROOT / "Testing" / "Python"))
sys.path.insert(0, str(ROOT / "Testing" / "Python" / "providers"))

from agents_fakes import FakeModelServer, Scripted  # noqa: E402
from gemini_server import FakeGemini, dump  # noqa: E402
from gemini_server import reply as gemini_reply  # noqa: E402
from google.genai import types  # noqa: E402
from test_bench_run_providers import ANSWER, MODULE, SURFACES, reply  # noqa: E402

from MedOpenClawLib.cli import main  # noqa: E402
from MedOpenClawLib.core.audit import read_trace  # noqa: E402

AWS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret-example"}
KEY = "k-gemini"  # FakeGemini's key (and every other fake's, which take any)
GEMINI = {"gemini": [], "gemini-vertex": ["--project", "p", "--region", "us-central1"]}


def one_case(root: Path) -> Path:
    from MedOpenClawLib.bench.modules import get
    from MedOpenClawLib.bench.package import prepare
    from MedOpenClawLib.bench.synthetic.cohort import CohortConfig, write_cohort

    write_cohort(root / "raw", CohortConfig(seed=3, cases=1, ct_size=96, workers=1), modules=[MODULE])
    prepare(get(MODULE), root / "raw" / get(MODULE).dataset_dir, root / "cases")
    return root / "cases"


def server(provider: str, served: list[int]) -> FakeModelServer:
    """A scripted server of ``provider``'s surface: the pre-flight's tool call, then the answer; each reply's size
    is appended to ``served``."""
    if provider in GEMINI:
        def answer(body: dict) -> types.GenerateContentResponse:
            names = [tool["name"] for group in body.get("tools") or [] for tool in group["functionDeclarations"]]
            part = types.Part(function_call=types.FunctionCall(name="report_colour", args={"colour": "red"})) \
                if "report_colour" in names else types.Part(text=ANSWER)
            built = gemini_reply([part])
            served.append(len(json.dumps(dump(built))))
            return built
        return FakeGemini(answer, key=KEY, bearer=provider == "gemini-vertex")

    def respond(body: dict) -> Scripted:
        answer = reply(SURFACES[provider][0], body)
        served.append(len(json.dumps(answer)))
        return Scripted(answer)
    return FakeModelServer([], respond=respond)


def episode(provider: str, cases: Path, out: Path) -> dict:
    """One run of ``provider``'s surface; what crossed the wire and how long it took."""
    extra = GEMINI[provider] if provider in GEMINI else SURFACES[provider][1]
    served: list[int] = []
    environment = AWS if provider == "anthropic-bedrock" else {"MEDOPENCLAW_API_KEY": KEY}
    saved = {name: os.environ.get(name) for name in (*AWS, "MEDOPENCLAW_API_KEY")}
    os.environ.pop("MEDOPENCLAW_API_KEY", None)
    os.environ.update(environment)
    printed = io.StringIO()
    try:
        with server(provider, served) as fake, contextlib.redirect_stdout(printed), \
                contextlib.redirect_stderr(io.StringIO()):
            started = time.perf_counter()
            code = main(["bench", "run", "--module", MODULE, "--agent", "model", "--provider", provider, "--model",
                         "m-1", "--base-url", fake.url, *extra, "--limit", "1", "--max-rounds", "2",
                         "--max-retries", "0", "--cases", str(cases), "--out", str(out)])
            wall = time.perf_counter() - started
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    calls = [record["payload"] for trace in out.rglob("trace-*.jsonl") for record in read_trace(trace)
             if record["kind"] == "model_output"]
    summary = json.loads((printed.getvalue().strip().splitlines() or ["{}"])[-1])
    return {"exit_code": code, "scored": summary.get("scored"),
            "requests": len(fake.requests), "request_bytes": sum(len(request["raw"]) for request in fake.requests),
            "reply_bytes": sum(served), "episode_model_calls": len(calls),
            "model_call_seconds": [call["usage"].get("model_seconds") for call in calls], "wall_seconds": wall,
            "sent_bytes_recorded": [(call.get("request") or {}).get("sent_bytes") for call in calls]}


def transport(provider: str) -> str:
    """The SDK client class that carries the provider's requests (``openai.OpenAI``, ...)."""
    from MedOpenClawLib.providers import ProviderConfig, make_provider

    client = make_provider(ProviderConfig(kind=provider, model="m", base_url="http://127.0.0.1:9", api_key=KEY,
                                          region="us-east-1", project="p", api_version="2024-10-21")).client
    return f"{type(client).__module__.split('._')[0].removesuffix('.client')}.{type(client).__name__}"


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "model_traffic.json"))
    parser.add_argument("--repeats", type=int, default=3, help="runs per provider (medians are reported)")
    args = parser.parse_args()
    import httpx2

    providers: dict = {}
    with tempfile.TemporaryDirectory() as scratch:
        cases = one_case(Path(scratch) / "cohort")
        for provider in [*SURFACES, *GEMINI]:
            runs = [episode(provider, cases, Path(scratch) / f"{provider}-{repeat}") for repeat in range(args.repeats)]
            first = runs[0]
            seconds = [value for run in runs for value in run["model_call_seconds"] if value is not None]
            providers[provider] = {
                "transport": transport(provider),
                "ok": all(run["exit_code"] == 0 and run["scored"] == 1 for run in runs),
                "requests": first["requests"], "request_bytes": first["request_bytes"],
                "reply_bytes": first["reply_bytes"], "episode_model_calls": first["episode_model_calls"],
                "sent_bytes_recorded_in_trace": first["sent_bytes_recorded"],
                "model_call_ms_median": round(1000 * statistics.median(seconds), 1) if seconds else None,
                "wall_seconds_median": round(statistics.median(run["wall_seconds"] for run in runs), 2),
                "runs": args.repeats}
            print(f"{provider}: {providers[provider]}", file=sys.stderr)
    path = Path(args.out)
    results = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    results["providers"] = providers
    results["provider_sdks"] = {**{name: version(name) for name in ("openai", "anthropic", "google-genai")},
                                "httpx2": httpx2.__version__, "load_average": round(os.getloadavg()[0], 1)}
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main_bench()

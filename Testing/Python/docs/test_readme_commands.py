"""The README and docs/ as a user types them: every ``medopenclaw`` and ``npx`` command they show (the Use table,
inline commands, code blocks) runs through the installed console script, exactly as written, from a fresh working
directory of its own, with relative paths. Only placeholders are filled (CASES, RAW, M, URL, a trace's ``...``),
an alternative ``a|b`` takes its first choice, an optional ``[...]`` is given, and a run gets a small limit
(``--limit 1``, one generated case) to stay fast. A documented command that has no entry in :data:`COMMANDS` fails
the suite, as the generated tool tables are checked."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from model_servers import PROFILES, LimitedModelServer, ScriptedVLM
from small_cohort import SMALL

from MedOpenClawLib.bench.cohort_cache import synthetic_cases
from MedOpenClawLib.bench.synthetic.cohort import write_cohort
from MedOpenClawLib.cli import build_parser

REPO = Path(__file__).resolve().parents[3]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CONSOLE_SCRIPT = Path(sys.executable).with_name("medopenclaw")
TOKEN = "readme-token"
COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ )*(?:medopenclaw|npx) ")


@dataclass(frozen=True)
class Spec:
    """How a documented command runs: ``needs`` (what the fixture puts in its fresh working directory), its own
    placeholder values, ``then`` (the extra option making it small), ``server`` (it serves until stopped)."""

    needs: tuple[str, ...] = ()
    fills: dict = field(default_factory=dict)
    then: tuple[str, ...] = ()
    server: str = ""
    skip: str = ""  # why this command cannot run here, and which test covers what it does


SMALL_RUN = ("--limit", "1")
COMMANDS = {
    "medopenclaw serve --data-root CASES/data [--port 8765] [--track B] [--app pathology]":
        Spec(("cases",), server="rest"),
    "medopenclaw mcp --data-root CASES/data [--transport http --port 8766]": Spec(("cases",), server="mcp"),
    "medopenclaw tools [--app radiology|pathology] [--track A|B] [--format neutral|mcp|openai|gemini|anthropic]":
        Spec(),
    "medopenclaw bench run --module ucsf-pdgm --agent oracle|heuristic|random --out runs/x": Spec(then=SMALL_RUN),
    "MEDOPENCLAW_API_KEY=... medopenclaw bench run --module nsclc --agent model --provider openai --base-url "
    "http://127.0.0.1:8000/v1 --model M --workers 2 --out runs/m": Spec(then=(*SMALL_RUN, "--max-rounds", "2")),
    "medopenclaw bench run --module ucsf-pdgm nsclc --agent oracle --out runs/x": Spec(then=SMALL_RUN),
    "medopenclaw bench cohort --where": Spec(),
    "medopenclaw bench cohort --prune": Spec(),
    "medopenclaw --version": Spec(),
    "medopenclaw bench prepare --module lumiere --images native ...":
        Spec(("raw",), {"...": "--source raw/LUMIERE --out cases-native"}),
    "medopenclaw bench run ... --agent replay --replay-from runs/m --out runs/m-replay":
        Spec(("runs/m",), {"...": "--module nsclc"}, then=SMALL_RUN),
    "medopenclaw bench prepare --module nsclc --source RAW --out CASES":
        Spec(("raw",), {"RAW": "raw/NSCLC-Radiogenomics", "CASES": "prepared"}),
    "medopenclaw bench score --module M --cases CASES --responses answers.jsonl --name M3D [--out DIR]":
        Spec(("cases", "answers.jsonl")),
    "medopenclaw bench report runs/a runs/b ... [--out DIR]": Spec(("runs/a", "runs/b")),
    "medopenclaw bench compare runs/a runs/b [--json]": Spec(("runs/a", "runs/b")),
    "medopenclaw trace verify runs/x/.../trace.jsonl": Spec(("runs/x",)),
    "medopenclaw trace audit runs/x/.../trace.jsonl|runs/x [--json] [--fail-on high]": Spec(("runs/x",)),
    "medopenclaw replay runs/x/.../trace.jsonl --data-root CASES/data": Spec(("runs/x", "cases")),
    'npx @modelcontextprotocol/inspector@0.17.5 --cli http://127.0.0.1:8766/mcp --transport http --header '
    '"Authorization: Bearer $MEDOPENCLAW_TOKEN" --method tools/list': Spec(("cases",), server="inspector"),
    "medopenclaw bench cohort --size demo|full --out RAW":  # the raw LUMIERE `bench prepare` reads: one case, 4 mm
        Spec(then=("--modules", "lumiere", "--cases", "1", "--mri-spacing", "4")),
    "medopenclaw trace audit out/run/episodes/CASE__r1/trace-1.jsonl": Spec(("runs/x",), {"out/run": "runs/x"}),
    "medopenclaw trace audit TRACE --json": Spec(("runs/x",)),
    "medopenclaw trace audit TRACE --fail-on high": Spec(("runs/x",)),
    "medopenclaw trace audit out/run": Spec(("runs/x",), {"out/run": "runs/x"}),
    "medopenclaw bench run --module lumiere --agent oracle --limit 1 --slicer SLICER --out runs/slicer-smoke":
        Spec(skip="needs a real 3D Slicer (docs/verify-in-slicer.md is the check run there; worker/ tests run "
                  "--slicer with the launcher double)"),
    "medopenclaw bench run --module nsclc --agent model --provider openai --base-url URL --model M --executor ray "
    "--ray-address HEAD:6379 --workers auto --out runs/m":
        Spec(skip="needs a Ray cluster at HEAD:6379 (bench/test_runner_ray.py runs the executor on a local one)"),
}


def command_words() -> set[str]:
    """Every sub-command name: a code span of names only (``medopenclaw bench report``) names a command in prose."""
    import argparse

    def walk(parser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield name
                    yield from walk(sub)

    return {"medopenclaw", *walk(build_parser())}


def documented_commands() -> list[str]:
    """The commands of the README and docs/: code spans and code-block lines (joined over ``\\``), comments cut."""
    words, found = command_words(), []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        lines = []
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            lines += [line.split("  #")[0] for line in re.sub(r"\\\n\s*", "", block).splitlines()]
        spans = re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        for candidate in [*lines, *spans]:
            command = " ".join(candidate.replace("\\|", "|").split())
            if COMMAND.match(command + " ") and not set(command.split()) <= words and command not in found:
                found.append(command)
    return found


def test_every_documented_command_is_run_by_this_test():
    documented = documented_commands()
    assert len(documented) >= 20
    assert [command for command in documented if command not in COMMANDS] == []
    assert [command for command in COMMANDS if command not in documented] == []  # a command the docs dropped


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def concrete(text: str, spec: Spec, values: dict) -> tuple[dict, list[str]]:
    """(environment, argv) of a documented command: placeholders filled, ``[...]`` given, ``a|b`` -> ``a``."""
    for placeholder, value in spec.fills.items():
        text = text.replace(placeholder, value)
    text = re.sub(r"\[([^]]*)\]", r"\1", text)
    words = shlex.split(text.replace("$MEDOPENCLAW_TOKEN", TOKEN))
    environment = {}
    while re.match(r"^[A-Z_]+=", words[0]):
        name, _, value = words.pop(0).partition("=")
        environment[name] = "k" if value == "..." else value
    argv = []
    for previous, word in zip([None, *words], words):
        word = word.split("|")[0] if "|" in word and not word.startswith("http") else word
        if word == "...":
            continue
        if previous == "--model" and word == "M":
            word = "local-vlm"
        argv.append(values.get(word, word))
    return environment, [*argv, *spec.then]


# the documented commands whose output other documented commands read, with the folder of the world they run from:
# the world runs them as written, once, and their own tests check those runs instead of making them a second time
PRODUCERS = {
    "medopenclaw bench run --module ucsf-pdgm --agent oracle|heuristic|random --out runs/x": ".",
    "MEDOPENCLAW_API_KEY=... medopenclaw bench run --module nsclc --agent model --provider openai --base-url "
    "http://127.0.0.1:8000/v1 --model M --workers 2 --out runs/m": ".",
    "medopenclaw bench run --module ucsf-pdgm nsclc --agent oracle --out runs/x": "multi",  # its own runs/x
    "medopenclaw bench cohort --size demo|full --out RAW": ".",
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """What the documented commands act on, made once: the cached cohort's UCSF-PDGM package as ``cases``; the
    documented oracle run ``runs/x``, model run ``runs/m`` (against a scripted model server), oracle run of two
    modules (``multi/runs/x``) and cohort command (raw LUMIERE) run as written from the world's fresh folders
    (``typed`` holds their completed processes); two agents on the same NSCLC case as ``runs/a`` (the oracle, of
    the two-module run) and ``runs/b`` (the model); a raw NSCLC dataset of one case, and model answers."""
    base = tmp_path_factory.mktemp("readme-world")
    cases = synthetic_cases("ucsf-pdgm")
    server = LimitedModelServer(PROFILES["openai"], ScriptedVLM(rounds=1)).__enter__()
    values = placeholder_values({"server": server, "trace": None}, free_port())  # no trace exists yet
    typed = {}
    for documented, folder in PRODUCERS.items():
        extra, argv = concrete(documented, COMMANDS[documented], values)
        (base / folder).mkdir(exist_ok=True)
        typed[documented] = run_as_written(argv, {**environment(), **extra}, base / folder)
    shutil.copytree(base / "multi" / "runs" / "x" / "nsclc", base / "runs" / "a")
    shutil.copytree(base / "runs" / "m", base / "runs" / "b")
    # the raw NSCLC the prepare command reads (the cohort command has no CT size, and at the demo size of 256^2 a
    # case costs 14 s of CPU): small_cohort's 96^2 CT, made in this process
    write_cohort(base / "raw", replace(SMALL, cases=1), modules=["nsclc"])
    (base / "answers.jsonl").write_text(json.dumps({"case_id": "UCSF-PDGM-0001", "response": "ANSWER: A"}) + "\n")
    trace = next((base / "runs" / "x" / "episodes").glob("*/trace-1.jsonl")).relative_to(base).as_posix()
    yield {"base": base, "cases": cases, "server": server, "trace": trace, "typed": typed}
    server.__exit__(None, None, None)


def run_as_written(argv: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    """A documented command that ends by itself, run through the console script (or npx) from ``cwd``."""
    program = shutil.which("npx") if argv[0] == "npx" else str(CONSOLE_SCRIPT)
    return subprocess.run([program, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def environment() -> dict:
    return {**os.environ, "MEDOPENCLAW_TOKEN": TOKEN,
            "PYTHONPATH": os.pathsep.join([str(REPO / "MedOpenClaw"), str(REPO / "MedCopilot")])}


def fresh_directory(world: dict, spec: Spec, tmp_path: Path) -> Path:
    cwd = tmp_path / "user"
    cwd.mkdir(parents=True)
    for need in spec.needs:
        source = world["cases"] if need == "cases" else world["base"] / need
        (cwd / need).parent.mkdir(parents=True, exist_ok=True)
        if need == "cases":  # read only: the cached package itself
            (cwd / need).symlink_to(source, target_is_directory=True)
        elif source.is_dir():
            shutil.copytree(source, cwd / need, symlinks=True)
        else:
            shutil.copy(source, cwd / need)
    return cwd


def placeholder_values(world: dict, port: int) -> dict:
    return {"runs/x/.../trace.jsonl": world["trace"], "TRACE": world["trace"],
            "runs/x/episodes/CASE__r1/trace-1.jsonl": world["trace"], "http://127.0.0.1:8000/v1": world["server"].url,
            "M": "ucsf-pdgm", "DIR": "out-dir", "CASES": "cases", "CASES/data": "cases/data", "RAW": "raw",
            "8765": str(port), "8766": str(port), "http://127.0.0.1:8766/mcp": f"http://127.0.0.1:{port}/mcp",
            }


def wait_until_serving(process: subprocess.Popen, url: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()
        try:
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
            urllib.request.urlopen(request, timeout=5).read()
            return
        except urllib.error.HTTPError:  # it answers (the MCP endpoint refuses a plain GET)
            return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"nothing served at {url}")


@contextmanager
def serving(argv: list[str], cwd: Path, env: dict, url: str):
    """A documented command that serves until stopped, run through the console script from ``cwd``: yields once
    ``url`` answers, and stops it (SIGTERM, as a user's Ctrl-C or service manager would) afterwards."""
    server = subprocess.Popen([str(CONSOLE_SCRIPT), *argv[1:]], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        wait_until_serving(server, url)
        yield server
    finally:
        server.terminate()
        server.wait(timeout=60)


MCP = "medopenclaw mcp --data-root CASES/data [--transport http --port 8766]"


@pytest.fixture(scope="module")
def typed_mcp(world, tmp_path_factory):
    """The documented ``mcp`` command as written, from a fresh directory of its own, serving: its own test checks
    that it serves and the documented Inspector command lists its tools (one server start for both)."""
    port = free_port()
    cwd = fresh_directory(world, COMMANDS[MCP], tmp_path_factory.mktemp("mcp"))
    argv = concrete(MCP, COMMANDS[MCP], placeholder_values(world, port))[1]
    with serving(argv, cwd, environment(), f"http://127.0.0.1:{port}/mcp") as server:
        yield {"process": server, "port": port}


@pytest.mark.parametrize("documented", list(COMMANDS))
def test_the_documented_command_runs_as_written(documented, world, tmp_path, request):
    spec = COMMANDS[documented]
    if spec.skip:
        pytest.skip(spec.skip)
    cwd = fresh_directory(world, spec, tmp_path)
    # the Inspector's documented URL is the documented mcp command's port (8766 in both)
    port = request.getfixturevalue("typed_mcp")["port"] if spec.server in ("mcp", "inspector") else free_port()
    extra, argv = concrete(documented, spec, placeholder_values(world, port))
    env = {**environment(), **extra}
    if documented.startswith("medopenclaw bench cohort --prune"):
        env["MEDOPENCLAW_CACHE"] = str(tmp_path / "cache")  # never the suite's or the user's cohorts
    if spec.server == "mcp":  # typed_mcp started it as written, and it served
        assert request.getfixturevalue("typed_mcp")["process"].poll() is None
        return
    if spec.server == "inspector":
        node = request.getfixturevalue("node_clients")  # its pinned Inspector: npx finds it in the project there
        completed = subprocess.run([shutil.which("npx"), *argv[1:]], cwd=node, env=env, capture_output=True,
                                   text=True, timeout=300)
        assert completed.returncode == 0, completed.stderr[-2000:]
        assert "open_case" in {tool["name"] for tool in json.loads(completed.stdout)["tools"]}
        return
    if spec.server:
        with serving(argv, cwd, env, f"http://127.0.0.1:{port}/v1/tools"):
            pass
        return
    completed = world["typed"].get(documented) or run_as_written(argv, env, cwd)
    assert completed.returncode == 0, (argv, completed.stderr[-2000:])

"""The package as it ships: a wheel built from exactly what the Dockerfile copies into
the image (its COPY lines and .dockerignore, read here so the two cannot drift),
installed alone into a fresh virtualenv, runs every `coachbus` command from a folder
that is not the repository.

The fresh virtualenv borrows the installed dependencies (a .pth line naming this
interpreter's site-packages; .pth files in that folder are not run, so the editable
install's finder never loads) and nothing else: coachbus, services and evaluation
come from the wheel, which each run checks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from setuptools import find_namespace_packages

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "eval"
SERVICES_WITH_DOCS = ("shadow", "persona", "plasticity", "stability", "coach", "synth", "gateway")


# --------------------------------------------------------------------------- the image's copy


def _build_copies() -> list[tuple[list[str], str]]:
    """(sources, destination) of each COPY from the build context (a ``--from`` COPY
    moves files between stages, not from the repository)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    copies = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].upper() != "COPY":
            continue
        if any(w.startswith("--from") for w in words[1:]):
            continue
        *sources, dest = [w for w in words[1:] if not w.startswith("--")]
        copies.append((sources, dest))
    return copies


def _glob(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regular expression (Go's filepath.Match, plus
    ``**`` for any number of folders)."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out, i = out + pattern[i : end + 1], end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def _ignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            negate = line.startswith("!")
            rules.append((negate, _glob(line.removeprefix("!").strip("/"))))
    return rules


def _ignored(relative: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last pattern that matches the path or a folder above it wins."""
    parts = relative.split("/")
    above = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    ignored = False
    for negate, rx in rules:
        if any(rx.match(p) for p in above):
            ignored = not negate
    return ignored


def copy_as_the_image(target: Path) -> None:
    rules = _ignore_rules()
    for sources, dest in _build_copies():
        for source in sources:
            path = ROOT / source
            assert path.exists(), f"the Dockerfile copies {source}, which does not exist"
            into = target / dest
            if path.is_dir():
                for f in sorted(path.rglob("*")):
                    if f.is_file() and not _ignored(f.relative_to(ROOT).as_posix(), rules):
                        out = into / f.relative_to(path)
                        out.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(f, out)
            elif not _ignored(source, rules):
                out = into / path.name if dest.endswith("/") else into
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, out)


def _packages(root: Path) -> set[str]:
    """What pyproject.toml's package find includes, under ``root``."""
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found: set[str] = set()
    for where in find["find"]["where"]:
        found |= set(find_namespace_packages(str(root / where), include=find["find"]["include"]))
    return {p for p in found if "__pycache__" not in p.split(".")}


def test_the_image_copies_every_package_the_build_includes(tmp_path: Path) -> None:
    copy_as_the_image(tmp_path)
    assert (tmp_path / "pyproject.toml").is_file()
    missing = _packages(ROOT) - _packages(tmp_path)
    assert not missing, f"the Dockerfile (or .dockerignore) leaves out {sorted(missing)}"


def test_dockerignore_patterns_read_as_docker_reads_them() -> None:
    rules = _ignore_rules()
    assert _ignored("tests/conftest.py", rules)
    assert _ignored(".env", rules)
    assert not _ignored("shared/coachbus/cli.py", rules)
    assert _ignored("shared/coachbus/__pycache__/cli.cpython-311.pyc", rules)
    assert not _ignored("services/gateway/static/app.js", rules)


# --------------------------------------------------------------------------- the fresh venv


@dataclass(frozen=True)
class Installed:
    venv: Path
    site: Path
    source: Path  # the image's copy the wheel was built from
    cwd: Path  # an unrelated folder the commands run in
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / "coachbus"), *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def _must(argv: list[str], *, timeout: float) -> None:
    run = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, f"{' '.join(argv)}\n{run.stdout}{run.stderr}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("packaging")
    source, wheels, venv, cwd = base / "src", base / "wheels", base / "venv", base / "elsewhere"
    cwd.mkdir()
    copy_as_the_image(source)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    # The build backend is installed in an isolated environment, as in the image.
    _must([*pip, "wheel", "--no-deps", "-q", "-w", str(wheels), str(source)], timeout=240)
    (wheel,) = wheels.glob("coachbus-*.whl")
    _must([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=60)
    python = venv / "bin" / "python"
    _must(
        [*pip, "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        timeout=120,
    )
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.check_output([str(python), "-c", where], text=True).strip())
    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "_coachbus_test_dependencies.pth").write_text("\n".join(ours) + "\n")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith("COACHBUS_")
    }
    return Installed(venv=venv, site=site, source=source, cwd=cwd, env=env)


@pytest.mark.slow
def test_the_wheel_is_what_gets_imported(installed: Installed) -> None:
    run = subprocess.run(
        [
            str(installed.venv / "bin" / "python"),
            "-c",
            "import coachbus, services, evaluation; "
            "print(coachbus.__file__); print(services.__path__[0]); print(evaluation.__file__)",
        ],
        cwd=installed.cwd,
        env=installed.env,
        capture_output=True,
        text=True,
        check=True,
    )
    for line in run.stdout.splitlines():
        assert Path(line).is_relative_to(installed.site), line


@pytest.mark.slow
def test_the_wheel_carries_every_file_the_packages_have(installed: Installed) -> None:
    # Code and the data it reads (TOML, HTML, JS, CSS, py.typed); a README beside the
    # data is for people and stays out.
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    tops = {p.split(".")[0] for p in _packages(installed.source)}
    expected: set[str] = set()
    for where in find["find"]["where"]:
        for top in tops:
            folder = installed.source / where / top
            expected |= {
                f.relative_to(installed.source / where).as_posix()
                for f in folder.rglob("*")
                if f.is_file() and f.suffix != ".md"
            }
    shipped = {
        f.relative_to(installed.site).as_posix()
        for top in tops
        for f in (installed.site / top).rglob("*")
        if f.is_file() and "__pycache__" not in f.parts
    }
    assert expected - shipped == set(), "not in the wheel (package-data in pyproject.toml)"


def _commands(installed: Installed) -> list[str]:
    run = installed.run("--help")
    assert run.returncode == 0, run.stderr
    listed = re.search(r"\{([a-z,-]+)\}", run.stdout)
    assert listed, run.stdout
    return listed.group(1).split(",")


@pytest.mark.slow
def test_every_command_answers_help(installed: Installed) -> None:
    commands = _commands(installed)
    assert {"run", "topics", "docs", "eval", "replay", "llm-sim", "chat"} <= set(commands)
    for argv in [[c, "--help"] for c in commands] + [["topics", "create", "--help"]]:
        run = installed.run(*argv)
        assert run.returncode == 0, (argv, run.stderr)
        assert "usage:" in run.stdout, argv
        assert "Traceback" not in run.stderr, (argv, run.stderr)


@pytest.mark.heavy
@pytest.mark.slow
def test_eval_scores_every_corpus_given_the_corpora(installed: Installed) -> None:
    run = installed.run("eval", "all", "--split", "heldout", "--json", "--data", str(DATA))
    assert run.returncode == 0, run.stderr
    corpora = json.loads(run.stdout)["corpora"]
    assert set(corpora) == {"crisis", "steps", "register", "patterns", "conflicts", "replies"}
    assert corpora["crisis"]["tiers"]["deterministic"]["items"] > 0
    conv = installed.run(
        "eval", "crisis", "--conversations", "--split", "calibration", "--json", "--data", str(DATA)
    )
    assert conv.returncode == 0, conv.stderr
    assert json.loads(conv.stdout)["corpora"]["conversations"]["items"] > 0


@pytest.mark.slow
def test_eval_without_the_corpora_says_to_pass_data(installed: Installed) -> None:
    # The labelled corpora are not installed; from any other folder the command says
    # so in one line.
    run = installed.run("eval", "crisis")
    assert run.returncode == 2
    said = [line for line in run.stderr.splitlines() if line.startswith("coachbus eval:")]
    assert len(said) == 1 and "--data" in said[0], run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.slow
def test_docs_writes_every_interface_document(installed: Installed) -> None:
    out = installed.cwd / "docs-out"
    run = installed.run("docs", "--out", str(out))
    assert run.returncode == 0, run.stderr
    for name in SERVICES_WITH_DOCS:
        assert json.loads((out / "asyncapi" / f"{name}.json").read_text())["asyncapi"]
    assert json.loads((out / "openapi.json").read_text())["paths"]


@pytest.mark.slow
def test_llm_sim_serves_with_a_shipped_profile(installed: Installed) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sim = subprocess.Popen(
        [
            str(installed.venv / "bin" / "coachbus"),
            "llm-sim",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--profile",
            "instant",
        ],
        cwd=installed.cwd,
        env=installed.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert sim.poll() is None, sim.communicate()[1]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                    models = json.loads(r.read())
                break
            except OSError:
                assert time.monotonic() < deadline, "the simulator did not answer in 30 s"
                time.sleep(0.2)
        assert models["data"]
    finally:
        sim.terminate()
        sim.wait(timeout=10)

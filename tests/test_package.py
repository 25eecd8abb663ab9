"""fxrl as a package: ``python -m build`` makes the sdist and the wheel, ``twine check``
passes on both, they carry LICENSE, py.typed and complete metadata, and the wheel,
installed into a fresh venv with its core dependencies only (torch from the local CPU
build that constraints.txt pins), runs ``fxrl --help``, a short ``fxrl train``, ``fxrl
eval`` and ``fxrl plot``, imports the envs and the algorithms, and says which extra to
install for what it lacks. Built once and installed once per test run (module fixtures)."""

from __future__ import annotations

import ast
import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11


ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# What the sdist is built from (MANIFEST.in and pyproject.toml say what goes in).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in")
# No extra's package: none may be installed by the core dependencies.
OPTIONAL = ("gymnasium", "onnx", "onnxruntime", "onnxscript", "tensorboard", "wandb", "ray",
            "hypothesis", "imageio", "ale_py", "stable_baselines3", "pytest")  # fmt: skip


def _version() -> str:
    """fxrl/__init__.py's ``__version__``, read without importing fxrl."""
    for node in ast.parse((ROOT / "fxrl" / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "__version__":
            return node.value.value
    raise AssertionError("fxrl/__init__.py has no __version__")


VERSION = _version()


def run(args: list, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    assert out.returncode == 0, f"{args} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, Path]:
    """The sdist and the wheel, built from a copy of the package's sources (so the build
    writes nothing into the checkout)."""
    tmp = tmp_path_factory.mktemp("package")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "fxrl", src / "fxrl", ignore=shutil.ignore_patterns("__pycache__"))
    run([sys.executable, "-m", "build", "--outdir", tmp / "dist", src])
    [wheel] = (tmp / "dist").glob("*.whl")
    [sdist] = (tmp / "dist").glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def test_twine_check_passes_on_the_wheel_and_the_sdist(dist):
    out = run([sys.executable, "-m", "twine", "check", "--strict", dist["wheel"], dist["sdist"]])
    assert out.stdout.count("PASSED") == 2, out.stdout


def test_the_wheel_carries_the_license_py_typed_and_complete_metadata(dist):
    assert dist["wheel"].name == f"fxrl-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(dist["wheel"]) as whl:
        names = set(whl.namelist())
        info = f"fxrl-{VERSION}.dist-info"
        meta = email.parser.Parser().parsestr(whl.read(f"{info}/METADATA").decode())
        license_text = whl.read(f"{info}/licenses/LICENSE").decode()
        entry_points = whl.read(f"{info}/entry_points.txt").decode()
    assert {"fxrl/py.typed", "fxrl/__init__.py", "fxrl/web/static/index.html"} <= names
    assert not any(n.startswith("tests/") for n in names)
    assert license_text.startswith("MIT License") and "fxrl developers" in license_text
    assert "fxrl = fxrl.cli:main" in entry_points
    assert meta["Name"] == "fxrl" and meta["Version"] == VERSION
    assert meta["License-Expression"] == "MIT" and meta["License-File"] == "LICENSE"
    assert meta["Author"] == "fxrl developers" and meta["Requires-Python"] == ">=3.10"
    assert meta["Description-Content-Type"] == "text/markdown"
    assert meta.get_payload().startswith("# fxrl")  # the README as the long description
    classifiers = meta.get_all("Classifier")
    assert "Typing :: Typed" in classifiers and len(classifiers) >= 8
    assert len(meta["Keywords"].split(",")) >= 5
    core = [r for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    assert sorted(core) == sorted(PYPROJECT["project"]["dependencies"])
    extras = set(meta.get_all("Provides-Extra"))
    assert {"demo", "gym", "export", "wandb", "tensorboard", "ray", "dev"} <= extras


def test_the_sdist_carries_the_license_changelog_and_py_typed_and_no_tests(dist):
    with tarfile.open(dist["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml", "fxrl/py.typed"} <= names
    assert not any(n.startswith("tests") for n in names)


@pytest.fixture(scope="module")
def lean(dist, tmp_path_factory) -> dict:
    """A fresh venv holding the wheel and its core dependencies only; what fxrl does there.

    pip is the test's own, pointed at the venv (``--python``), and installs nothing into
    it beyond those; ``--no-compile`` leaves bytecode to the imports that need it.
    """
    tmp = tmp_path_factory.mktemp("lean")
    venv = tmp / "venv"
    # nothing of this session's Python path (a checkout on PYTHONPATH would look installed)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    run([sys.executable, "-m", "venv", "--without-pip", venv], env=env)
    python, fxrl = venv / "bin" / "python", venv / "bin" / "fxrl"
    run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-compile",
         "-c", ROOT / "constraints.txt", "torch==2.13.0", dist["wheel"]], env=env)  # fmt: skip
    work = tmp / "work"  # not the checkout: fxrl must come from the venv
    work.mkdir()
    # the console script once; the rest through fxrl.cli.main in one process (one import
    # of torch instead of one per command)
    out: dict = {"help": run([fxrl, "--help"], cwd=work, env=env).stdout, "run": work / "run"}
    script = LEAN_CHECKS.format(run=str(work / "run"), optional=OPTIONAL)
    out.update(json.loads(run([python, "-c", script], cwd=work, env=env).stdout))
    return out


# Run by the venv's python: what the core install imports, prints and refuses.
LEAN_CHECKS = textwrap.dedent(
    """
    import contextlib, importlib.metadata, importlib.resources, importlib.util, io, json
    import fxrl.envs, fxrl.algorithms
    from fxrl import random
    from fxrl.cli import main

    def cli(*args):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
                code = 0
            except SystemExit as e:
                code = e.code
        return {{"code": code, "out": out.getvalue(), "err": err.getvalue()}}

    env = fxrl.envs.make("CartPole-v1")
    state, ts = env.reset(random.key(0))
    algo = fxrl.algorithms.ppo.make(fxrl.algorithms.ppo.Config(env="CartPole-v1"))
    run = {run!r}
    train = cli("train", "ppo", "--env", "CartPole-v1", "--seeds", "2", "--total-steps", "512",
                "--no-compile", "--threads", "1", "--quiet", "--out", run)
    print(json.dumps({{
        "train": train,
        "fxrl_file": fxrl.__file__,
        "obs_shape": list(ts.obs.shape),
        "steps_per_update": algo.steps_per_update,
        "installed_optional": [m for m in {optional!r} if importlib.util.find_spec(m)],
        "torch": importlib.metadata.version("torch"),
        "py_typed": importlib.resources.files("fxrl").joinpath("py.typed").is_file(),
        "version": cli("--version"),
        "eval": cli("eval", run, "--episodes", "1", "--threads", "1"),
        "plot": cli("plot", run, "--out", run + "/plot.png"),
        "eval_gymnasium": cli("eval", run, "--episodes", "1", "--gymnasium"),
        "export_onnx": cli("export", run, "--format", "onnx"),
        "tensorboard": cli("train", "ppo", "--tensorboard", "--no-compile", "--out", run + "-tb"),
        "wandb": cli("resume", run, "--wandb"),
        "demo": cli("demo", "--out", run + "-demo"),
    }}))
    """
)


def test_the_venv_holds_the_core_dependencies_only_and_the_local_cpu_torch(lean):
    assert lean["installed_optional"] == []
    assert lean["torch"] == "2.13.0+cpu"
    assert "/venv/" in lean["fxrl_file"] and str(ROOT) not in lean["fxrl_file"]
    assert lean["py_typed"]


def test_fxrl_help_and_version_run_from_the_installed_console_script(lean):
    assert "fxrl train" in lean["help"] and "fxrl demo" in lean["help"]
    assert lean["version"] == {"code": 0, "out": f"fxrl {VERSION}\n", "err": ""}


def test_a_short_train_eval_and_plot_run_on_the_core_install(lean):
    assert lean["train"]["code"] == 0, lean["train"]
    assert re.search(r"run: 512 steps per seed, return", lean["train"]["out"]), lean["train"]
    assert len((lean["run"] / "metrics.jsonl").read_text().splitlines()) == 2  # 1 update x 2 seeds
    assert (lean["run"] / "curve.png").read_bytes()[:4] == b"\x89PNG"
    assert lean["eval"]["code"] == 0 and "greedy return over 1 episodes" in lean["eval"]["out"]
    assert lean["plot"]["code"] == 0 and (lean["run"] / "plot.png").exists()


def test_the_envs_and_algorithms_import_and_work_on_the_core_install(lean):
    assert lean["obs_shape"] == [4] and lean["steps_per_update"] == 512


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        ("eval_gymnasium", "gym"),
        ("export_onnx", "export"),
        ("tensorboard", "tensorboard"),
        ("wandb", "wandb"),
        ("demo", "demo"),
    ],
)
def test_what_needs_an_extra_says_which_in_one_line_on_the_core_install(lean, command, extra):
    result = lean[command]
    assert result["code"] == 2, result
    assert result["err"].count("\n") == 1, result["err"]
    assert result["err"].endswith(f"is not installed: pip install 'fxrl[{extra}]'\n"), result

"""Optional packages: fxrl imports each only through ``fxrl._optional.require``, the extra a
message names exists and installs that package, and with the package absent (blocked in
``sys.modules``) each entry point fails in one line naming its extra. The real lean
install, the wheel with its core dependencies only, is tests/test_package.py's."""

import ast
import re
import sys
from pathlib import Path

import pytest
import torch

from fxrl import _optional, specs
from fxrl._optional import EXTRAS, MissingExtra, require

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
OPTIONAL = PYPROJECT["project"]["optional-dependencies"]


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def extra_packages(extra: str) -> set[str]:
    """The distributions an extra installs, its ``fxrl[a,b]`` references followed."""
    out = set()
    for req in OPTIONAL[extra]:
        if _name(req) == "fxrl":
            for inner in re.search(r"\[(.*)\]", req).group(1).split(","):
                out |= extra_packages(inner.strip())
        else:
            out.add(_name(req))
    return out


def test_every_extra_a_message_names_exists_and_installs_that_package():
    for module, (dist, extra) in EXTRAS.items():
        assert extra in OPTIONAL, f"{module}: no extra {extra!r} in pyproject.toml"
        assert dist in extra_packages(extra), f"{module}: fxrl[{extra}] does not install {dist}"


def test_the_demo_extra_installs_every_package_the_demo_checks_for():
    from fxrl.run.demo import DEMO_NEEDS

    assert {EXTRAS[m][0] for m in DEMO_NEEDS} <= extra_packages("demo")


def test_no_core_dependency_is_also_an_optional_package():
    core = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert core & {dist for dist, _ in EXTRAS.values()} == set()


def _guarded_packages() -> dict[Path, set[str]]:
    """Packages whose ``__init__`` requires an optional module at import: every module
    inside them may import it directly."""
    out = {}
    for init in (ROOT / "fxrl").rglob("__init__.py"):
        tree = ast.parse(init.read_text())
        for node in tree.body:
            call = node.value if isinstance(node, ast.Expr) else None
            if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "require":
                out.setdefault(init.parent, set()).add(call.args[0].value.split(".")[0])
    return out


def _under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def test_fxrl_imports_optional_packages_only_through_require():
    guarded = _guarded_packages()
    assert guarded == {ROOT / "fxrl/testing": {"hypothesis"}, ROOT / "fxrl/distributed": {"ray"}}
    found = []
    for path in sorted((ROOT / "fxrl").rglob("*.py")):
        if path.name == "_optional.py":
            continue
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        allowed = set().union(*(m for pkg, m in guarded.items() if pkg in path.parents))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in EXTRAS or top in allowed or _under_type_checking(node, parents):
                    continue
                found.append(f"{path.relative_to(ROOT)} imports {module} (line {node.lineno})")
    # fxrl/deploy.py stands alone (no fxrl imports): it says its extra itself
    assert [f.split(" (line")[0] for f in found] == ["fxrl/deploy.py imports onnxruntime"], found
    assert "pip install 'fxrl[export]'" in (ROOT / "fxrl/deploy.py").read_text()


def test_require_returns_the_module_and_refuses_a_package_it_does_not_know():
    assert require("gymnasium.spaces", "x").Box is not None
    with pytest.raises(KeyError, match="'scipy' is not an optional package of fxrl"):
        require("scipy", "x")


def test_an_import_error_inside_an_installed_package_is_not_called_a_missing_extra(
    monkeypatch,
):
    def broken(name, *args, **kwargs):
        raise ImportError("libfoo.so: cannot open shared object file", name="libfoo")

    monkeypatch.setattr(_optional.importlib, "import_module", broken)
    with pytest.raises(ImportError, match="libfoo") as info:
        require("gymnasium", "x")
    assert not isinstance(info.value, MissingExtra)


def _exported():
    from fxrl.export import export

    return export(lambda p, x: x @ p["w"], {"w": torch.ones(2, 2)}, torch.ones(2))


def _cases(tmp_path):
    """(blocked module, call or a module to import afresh, extra its message must name)."""
    from fxrl import envs
    from fxrl.algorithms import core, ppo
    from fxrl.deploy import load_onnx
    from fxrl.envs import sb3
    from fxrl.export import to_onnx
    from fxrl.run.evaluate import evaluate_gymnasium
    from fxrl.run.metrics import MetricsWriter
    from fxrl.run.video import _Ffmpeg

    def evaluate():
        algo = ppo.make(ppo.Config(env="CartPole-v1"))
        params = algo.init(torch.tensor([0, 0])).params
        core.evaluate(algo, params, episodes=1)

    return [
        ("gymnasium", lambda: specs.to_gymnasium(specs.Discrete(2)), "gym"),
        ("gymnasium", lambda: specs.from_gymnasium(None), "gym"),
        ("gymnasium", lambda: envs.gym("CartPole-v1"), "gym"),
        ("gymnasium", "fxrl.envs.to_gym", "gym"),
        ("gymnasium", lambda: evaluate_gymnasium(lambda o: 0, "CartPole-v1", 1), "gym"),
        ("gymnasium", evaluate, "gym"),
        ("ale_py", lambda: envs.atari("Pong"), "atari"),
        ("onnxscript", lambda: to_onnx(_exported(), tmp_path / "p.onnx"), "export"),
        ("onnxruntime", lambda: load_onnx(tmp_path / "p.onnx"), "export"),
        ("tensorboard", lambda: MetricsWriter(tmp_path, tensorboard=True), "tensorboard"),
        ("imageio_ffmpeg", lambda: _Ffmpeg(tmp_path / "v.mp4", 30), "video"),
        ("stable_baselines3", sb3._vec_env_class.__wrapped__, "sb3"),
        ("hypothesis", "fxrl.testing", "testing"),
        ("ray", "fxrl.distributed", "ray"),
    ]


def test_each_entry_point_without_its_package_names_the_extra_in_one_line(tmp_path, monkeypatch):
    for module, call, extra in _cases(tmp_path):
        with monkeypatch.context() as m:
            m.setitem(sys.modules, module, None)
            if isinstance(call, str):  # imported afresh (the old modules are put back)
                for name in [n for n in sys.modules if n == call or n.startswith(call + ".")]:
                    m.delitem(sys.modules, name)
                call = lambda name=call: __import__(name)
            with pytest.raises(ModuleNotFoundError) as info:
                call()
        message = str(info.value)
        assert "\n" not in message and message.endswith(f"pip install 'fxrl[{extra}]'"), (
            module,
            message,
        )


def test_the_demo_without_gymnasium_or_onnx_runtime_names_the_demo_extra(
    tmp_path, monkeypatch, capsys
):
    from fxrl.cli import main

    for module in ("gymnasium", "onnxruntime"):
        with monkeypatch.context() as m:
            m.setitem(sys.modules, module, None)
            with pytest.raises(SystemExit) as info:
                main(["demo", "--out", str(tmp_path / "demo")])
        err = capsys.readouterr().err
        assert info.value.code == 2 and err.count("\n") == 1, err
        assert err.startswith("fxrl demo: error: fxrl demo needs ")
        assert err.endswith("pip install 'fxrl[demo]'\n")
    assert not (tmp_path / "demo").exists()

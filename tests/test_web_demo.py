"""The docs' live CartPole page: the committed models in docs/demo/cartpole are the current
CartPole env and a trained policy, and the docs hook adds the page, its script and
onnxruntime-web to the site. (tests/test_web_export.py opens the assembled page in
Chromium; tests/test_docs_build.py builds the whole site.)"""

from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path

import pytest
import torch

from fxrl import envs, random, tree
from fxrl.web import reference_episode
from fxrl.web import site as web_site

ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "docs" / "demo" / "cartpole"
ENV_ID = "CartPole-v1"


def load_hook():
    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location("web_demo", ROOT / "docs/hooks/web_demo.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook


def session(name):
    return ort.InferenceSession(str(DEMO / name), providers=["CPUExecutionProvider"])


def onnx_policy():
    policy = session("policy.onnx")

    def act(obs: torch.Tensor) -> torch.Tensor:
        (action,) = policy.run(None, {"obs": obs.numpy()})
        return torch.from_numpy(action)

    return act


def onnx_episode(seed, max_steps=None):
    """The episode as the page plays it: reset, step and policy all in ONNX Runtime."""
    manifest = json.loads((DEMO / "site.json").read_text())
    reset, step, act = session("reset.onnx"), session("step.onnx"), onnx_policy()
    names = [s["name"] for s in manifest["state"]]

    def split(outputs, sess):
        out = dict(zip([o.name for o in sess.get_outputs()], outputs, strict=True))
        return {n: out["next_" + n] for n in names}, out

    key = random.key(seed).numpy()
    state, out = split(reset.run(None, {"key": key}), reset)
    total, actions = 0.0, []
    while max_steps is None or len(actions) < max_steps:
        action = act(torch.from_numpy(out["obs"])[None])[0].numpy()
        state, out = split(step.run(None, {**state, "action": action}), step)
        actions.append(int(action))
        total += float(out["reward"])
        if out["terminated"] or out["truncated"]:
            break
    return {"return": total, "length": len(actions), "actions": actions}


def test_the_committed_models_are_the_current_env_and_a_trained_policy():

    manifest = json.loads((DEMO / "site.json").read_text())
    assert manifest["env_id"] == ENV_ID and manifest["models"]["policy"] == "policy.onnx"
    env = envs.make(ENV_ID, auto_reset=False, episode_stats=False)
    state, _ = env.reset(random.key(0))
    assert [s["name"] for s in manifest["state"]] == [f"state_{n}" for n in tree.path_names(state)]
    for seed in range(3):
        page = onnx_episode(seed)
        torch_env = reference_episode(onnx_policy(), ENV_ID, seed)
        # Actions agree until float rounding can matter (test_web_export's horizon).
        n = min(page["length"], torch_env["length"], 100)
        assert page["actions"][:n] == torch_env["actions"][:n]
        if page["actions"] == torch_env["actions"]:
            assert page["return"] == torch_env["return"]
        assert page["return"] >= 475, f"seed {seed}: the committed policy is not trained"


def assemble_site(site_dir: Path) -> Path:
    """docs/demo/cartpole as ``make docs`` builds it into ``site_dir`` (skips without
    onnxruntime-web): the committed files and what the hook adds."""
    hook = load_hook()
    from mkdocs.structure.files import File, Files

    try:
        hook.onnxruntime_web()
    except Exception as e:  # the hook's PluginError, which names the fix
        assert "make web-deps" in str(e)
        pytest.skip(str(e))
    docs = ROOT / "docs"
    committed = sorted(p.name for p in DEMO.iterdir())
    files = Files([File(f"demo/cartpole/{n}", str(docs), str(site_dir), True) for n in committed])
    config = types.SimpleNamespace(
        site_dir=str(site_dir), use_directory_urls=True, plugins=types.SimpleNamespace()
    )
    config.plugins._current_plugin = None
    hook.on_files(files, config).copy_static_files()
    return site_dir


def test_the_hook_adds_the_page_its_script_and_onnxruntime_web(tmp_path):
    hook = load_hook()
    assert hook.ORT_FILES == web_site.ORT_FILES
    assert hook.STATIC.resolve() == web_site.STATIC.resolve()
    assemble_site(tmp_path)
    built = sorted(p.name for p in (tmp_path / "demo" / "cartpole").iterdir())
    committed = [p.name for p in DEMO.iterdir()]
    static = [p.name for p in web_site.STATIC.iterdir()]
    assert built == sorted([*committed, *static, *web_site.ORT_FILES])
    wasm = "ort-wasm-simd-threaded.wasm"
    got = (tmp_path / "demo" / "cartpole" / wasm).read_bytes()
    assert got == (hook.onnxruntime_web() / wasm).read_bytes()
    assert sum(p.stat().st_size for p in DEMO.iterdir()) < 1_000_000  # KBs, no wasm


def test_the_hook_refuses_to_build_without_onnxruntime_web(tmp_path, monkeypatch):
    hook = load_hook()
    monkeypatch.setattr(hook, "ROOT", tmp_path)
    monkeypatch.delenv(hook.ORT_ENV_VAR, raising=False)
    with pytest.raises(Exception, match=r"onnxruntime-web not found.*make web-deps"):
        hook.onnxruntime_web()

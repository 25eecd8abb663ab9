"""A run's device: --device on the command line, recorded in config.json; checkpoints load
onto the device of the state they are read into; export does not depend on where the run
trained. (The GPU itself is measured by bench/gpu_bench.py; here, CPU-only machines.)"""

import json
import shutil

import pytest
import torch

from fxrl import tree
from fxrl.algorithms import ppo
from fxrl.cli import main
from fxrl.run import checkpoint
from fxrl.run.config_io import read_run_config
from fxrl.run.device import resolve
from fxrl.run.evaluate import load_run
from fxrl.run.export_run import export_run
from fxrl.run.loop import build, train

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
TINY = {"num_envs": 2, "num_steps": 8, "update_epochs": 1, "num_minibatches": 1, "total_steps": 32}


def run_main(capsys, *args):
    with pytest.raises(SystemExit) as done:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return done.value.code, out, err


@no_cuda
@pytest.mark.parametrize(
    "command",
    [
        ["train", "ppo", "--total-steps", "64", "--no-compile"],
        ["demo", "--total-steps", "64", "--no-compile"],
    ],
)
def test_device_cuda_without_cuda_is_a_one_line_error_before_anything_is_written(
    capsys, tmp_path, command
):
    code, _, err = run_main(capsys, *command, "--device", "cuda", "--out", tmp_path / "r")
    assert code == 2 and err.count("\n") == 1, err
    assert "device 'cuda': CUDA is not available here" in err and "--device cpu" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("device", "message"),
    [("gpu", "'gpu' is not a device; expected cpu, cuda"), ("meta", "fxrl runs train on")],
)
def test_a_device_that_is_not_one_or_not_for_training_is_refused(device, message):
    with pytest.raises(ValueError, match=message):
        resolve(device)


def test_resolve_keeps_the_cpu_and_defaults_to_torchs_default_device():
    assert resolve("cpu") == torch.device("cpu")
    assert resolve(None) == torch.get_default_device()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("device") / "run"
    config = ppo.Config(env="CartPole-v1", **TINY)
    train("ppo", config, d, num_seeds=2, compile=False, quiet=True, device="cpu")
    return d


def test_the_run_directory_records_its_device(run_dir):
    assert json.loads((run_dir / "config.json").read_text())["device"] == "cpu"
    assert read_run_config(run_dir)["device"] == "cpu"


def test_a_run_written_before_devices_were_recorded_reads_as_a_cpu_run(run_dir, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(run_dir, old)
    info = json.loads((old / "config.json").read_text())
    del info["device"]
    (old / "config.json").write_text(json.dumps(info))
    assert read_run_config(old)["device"] == "cpu"


def test_a_checkpoint_loads_onto_the_device_of_the_template_with_its_layout(run_dir):
    """Saved from the CPU, read into a template on another device (meta stands in for a
    GPU here): every leaf lands there, with the shape, dtype and strides it was saved with."""
    path = run_dir / "checkpoints" / "latest.safetensors"
    info = read_run_config(run_dir)
    _, cpu_template = build(info)
    cpu_state, _ = checkpoint.load(path, cpu_template)
    meta_template = tree.map(lambda x: x.to("meta"), cpu_template)
    meta_state, _ = checkpoint.load(path, meta_template)
    for a, b in zip(tree.leaves(cpu_state), tree.leaves(meta_state), strict=True):
        assert a.device.type == "cpu" and b.device.type == "meta"
        assert (a.shape, a.dtype, a.stride()) == (b.shape, b.dtype, b.stride())


def test_build_makes_the_template_on_the_device_asked(run_dir):
    _, state = build(read_run_config(run_dir), "meta")
    assert {x.device.type for x in tree.leaves(state)} == {"meta"}


def test_export_of_a_run_trained_elsewhere_is_the_same_onnx_policy(run_dir, tmp_path):
    """A GPU run's directory differs from a CPU run's only in config.json's device (its
    checkpoints hold CPU tensors): export builds on the CPU and writes the same bytes."""
    gpu = tmp_path / "gpu"
    shutil.copytree(run_dir, gpu)
    info = json.loads((gpu / "config.json").read_text())
    (gpu / "config.json").write_text(json.dumps({**info, "device": "cuda:0"}))
    here = export_run(run_dir, "onnx", out=tmp_path / "cpu.onnx", checkpoint_name="latest")
    there = export_run(gpu, "onnx", out=tmp_path / "gpu.onnx", checkpoint_name="latest")
    assert here.read_bytes() == there.read_bytes()
    _, _, state, _ = load_run(gpu)
    assert {x.device.type for x in tree.leaves(state)} == {"cpu"}

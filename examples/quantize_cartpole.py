"""int8 CartPole policy: how often does it pick the float32 policy's action?

    python examples/quantize_cartpole.py                       # writes runs/quantize_cartpole.jsonl
    python examples/quantize_cartpole.py --out docs/results/int8_cartpole.jsonl   # the docs' record

The policy is the live CartPole page's (``docs/demo/cartpole/policy.onnx``: PPO, MLP
4-64-64-2 with tanh, greedy return 500): its weights are read from that file, the actor
is exported with ``fxrl.export.export`` and written with ``fxrl.export.to_onnx`` in
float32 and in int8 (``quantize="int8"``: the first and last layers stay float32), and,
for comparison, with every layer int8. Calibration inputs are observations the float32
policy sees: envs of fxrl's CartPole-v1 played greedily side by side, 256 steps each (64
envs: 16384 observations, as ``fxrl export --quantize int8`` records them; 8 envs: 2048).
Three measurements, one JSON line each (after a first line with the command):

1. ``held_out``: the fraction of 4096 other observations (16 envs x 256 steps from another
   key) on which each int8 file picks float32's action, and the returns of 10 episodes of
   gymnasium's CartPole-v1 (reset seeds 0 to 9) played by it;
2. ``weight_bits``: the same held-out fraction for the default file's layers with 8-bit
   weights (ONNX Runtime's full range) and with fxrl's 7 (``reduce_range``), which differ
   on x86 CPUs without VNNI (the header line names the CPU);
3. ``gymnasium_episodes``: every observation of those 10 gymnasium episodes as the
   float32 policy plays them, asked of int8 files calibrated on 4 other gymnasium episodes
   (seeds 100 to 103): the fraction of equal actions over all of them and per episode.

Everything runs in ONNX Runtime with one thread; a minute or two on a laptop CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from fxrl import _quantize, envs, random
from fxrl.export import export, load_onnx, to_onnx
from fxrl.run.evaluate import evaluate_gymnasium

LIVE_PAGE = Path(__file__).resolve().parents[1] / "docs" / "demo" / "cartpole" / "policy.onnx"


def read_actor(path: Path) -> dict[str, torch.Tensor]:
    """The three dense layers of the ONNX policy (Gemm nodes, weights [out, in])."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    gemms = [n for n in model.graph.node if n.op_type == "Gemm"]
    return {
        f"{i}.{part}": torch.from_numpy(init[n.input[j]].copy())
        for i, n in enumerate(gemms)
        for j, part in ((1, "w"), (2, "b"))
    }


def actor(w: dict[str, torch.Tensor], obs: torch.Tensor) -> torch.Tensor:
    """obs float [B, 4] -> greedy action [B] (the PPO policy's mode)."""
    h = torch.tanh(obs @ w["0.w"].T + w["0.b"])
    h = torch.tanh(h @ w["1.w"].T + w["1.b"])
    return (h @ w["2.w"].T + w["2.b"]).argmax(-1)


def pure_env_frames(w: dict, key: torch.Tensor, num_envs: int, steps: int) -> torch.Tensor:
    """What the float32 policy sees playing ``num_envs`` CartPoles for ``steps`` steps."""
    env = envs.batch(envs.make("CartPole-v1"), num_envs)
    state, ts = env.reset(key)
    frames = []
    for _ in range(steps):
        frames.append(ts.obs)
        state, ts = env.step(state, actor(w, ts.obs))
    return torch.cat(frames)


def gymnasium_frames(act, seeds: range) -> list[np.ndarray]:
    """Every observation of one gymnasium episode per seed, the float32 policy playing."""
    import gymnasium

    env, out = gymnasium.make("CartPole-v1"), []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        frames, done = [], False
        while not done:
            frames.append(obs)
            obs, _, terminated, truncated, _ = env.step(int(act(obs[None])[0]))
            done = terminated or truncated
        out.append(np.stack(frames).astype(np.float32))
    env.close()
    return out


def cpu() -> dict[str, object]:
    """The CPU's model name and whether it has VNNI (int8 dot products without the 16-bit
    saturation of older x86 CPUs; fxrl's 7-bit weights give the same answers on both)."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    names = [line.split(":", 1)[1].strip() for line in text.splitlines()
             if line.startswith("model name")]  # fmt: skip
    return {"cpu": names[0] if names else None,
            "vnni": " avx512_vnni" in text or " avx_vnni" in text}  # fmt: skip


def same(policy, frames: np.ndarray, want: np.ndarray) -> float:
    return round(float((policy(frames) == want).mean()), 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policy", default=str(LIVE_PAGE), help="a float32 CartPole policy.onnx")
    parser.add_argument("--out", default="runs/quantize_cartpole.jsonl", help="JSON lines here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    w = read_actor(Path(args.policy))
    exported = export(actor, w, torch.zeros(2, 4), dynamic_batch=True)
    work = Path(tempfile.mkdtemp())
    fp32 = load_onnx(to_onnx(exported, work / "fp32.onnx"), threads=1)

    def int8_files(calibration: torch.Tensor | np.ndarray, tag: str) -> dict[str, object]:
        """The int8 file ``to_onnx`` writes, and every layer int8, calibrated on the frames."""
        default = work / f"{tag}.onnx"
        to_onnx(exported, default, quantize="int8", calibration=[calibration])
        coarse = work / f"{tag}_all.onnx"
        feeds = _quantize.feeds(exported, [torch.as_tensor(calibration)])
        _quantize.quantize_file(work / "fp32.onnx", coarse, feeds, exported.meta, "fxrl",
                                float_first=False, float_head=False)  # fmt: skip
        return {"first_last_float32": load_onnx(default, threads=1),
                "every_layer_int8": load_onnx(coarse, threads=1)}  # fmt: skip

    held_out = pure_env_frames(w, random.key(1), 16, 256).numpy()
    want = fp32(held_out)
    lines = [{"command": "python " + " ".join(sys.argv), "policy": Path(args.policy).name,
              "weights": "7-bit (reduce_range)", **cpu()}]  # fmt: skip
    returns = {"float32": evaluate_gymnasium(lambda o: int(fp32(o[None])[0]), "CartPole-v1", 10)}
    for envs_, frames in ((8, 2048), (64, 16384)):
        calibration = pure_env_frames(w, random.key(0), envs_, 256)
        for layers, policy in int8_files(calibration, f"cal{frames}").items():
            lines.append({
                "case": "held_out", "layers": layers, "calibration_frames": frames,
                "frames": len(held_out), "same_action": same(policy, held_out, want),
                "gymnasium_returns": evaluate_gymnasium(
                    lambda o, p=policy: int(p(o[None])[0]), "CartPole-v1", 10),
            })  # fmt: skip
    lines.append({"case": "held_out", "layers": "float32", "gymnasium_returns": returns["float32"]})
    # 8-bit weights (reduce_range off) against fxrl's 7: the same calibration (16384 frames)
    feeds = _quantize.feeds(exported, [torch.as_tensor(calibration)])
    for bits in (8, 7):
        path = work / f"bits{bits}.onnx"
        _quantize.quantize_file(work / "fp32.onnx", path, feeds, exported.meta, "fxrl",
                                reduce_range=bits == 7)  # fmt: skip
        policy = load_onnx(path, threads=1)
        agree = same(policy, held_out, want)
        lines.append({"case": "weight_bits", "layers": "first_last_float32", "bits": bits,
                      "frames": len(held_out), "same_action": agree})  # fmt: skip

    episodes = gymnasium_frames(fp32, range(10))
    calibration = np.concatenate(gymnasium_frames(fp32, range(100, 104)))
    for layers, policy in int8_files(calibration, "gym").items():
        per_episode = [same(policy, e, fp32(e)) for e in episodes]
        frames = np.concatenate(episodes)
        lines.append({
            "case": "gymnasium_episodes", "layers": layers, "episodes": len(episodes),
            "calibration_frames": len(calibration), "frames": len(frames),
            "same_action": same(policy, frames, fp32(frames)), "per_episode": per_episode,
        })  # fmt: skip
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    for line in lines[1:]:
        print(json.dumps({k: v for k, v in line.items() if k != "per_episode"}))


if __name__ == "__main__":
    main()

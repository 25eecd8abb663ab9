"""Plots curve.png from the seed*/metrics.jsonl and eval.json here (run from the repo root)."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

root = Path("docs/results/sb3_ppo_fxrl_cartpole")
fig, ax = plt.subplots(figsize=(6, 3.5))
for run in sorted(root.glob("seed*")):
    rows = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    rows = [r for r in rows if r["mean_return_100"] is not None]
    ev = json.loads((run / "eval.json").read_text())["eval_mean_return"]
    ax.plot(
        [r["step"] for r in rows],
        [r["mean_return_100"] for r in rows],
        label=f"{run.name} (greedy eval {ev:.0f})",
    )
ax.axhline(150, ls="--", c="gray", lw=0.8, label="test threshold 150")
ax.set_xlabel("env steps")
ax.set_ylabel("mean return, last 100 episodes")
ax.set_title("SB3 PPO on fxrl CartPole-v1 x 8 (fxrl.envs.to_sb3)")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(root / "curve.png", dpi=100)

"""``fxrl tour``: a short tour of what fxrl does (keys, specs, pytrees, envs, an ensemble,
export), printed as it runs."""

from __future__ import annotations

import time

import torch

from fxrl import random, specs, tree

__all__ = ["main"]


def _section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def demo_foundation() -> None:
    """Keys, vmap over seeds, bit-identical compiled draws, specs and pytrees."""
    _section("explicit random keys (Threefry-2x32)")
    key = random.key(0)
    key, sub = random.split(key)
    print("key(0) split ->", key.tolist(), sub.tolist())
    print("uniform(sub, (4,))  =", [round(v, 4) for v in random.uniform(sub, (4,)).tolist()])
    seeds = random.split(key, 8)
    per_seed = torch.func.vmap(lambda k: random.normal(k, (3,)).mean())(seeds)
    print("vmap over 8 seeds   =", [round(v, 3) for v in per_seed.tolist()])
    before = torch.get_rng_state()
    random.normal(key, (1000,))
    print("global torch RNG untouched:", torch.equal(before, torch.get_rng_state()))

    _section("specs: sample, contains, project")
    obs_spec = specs.Composite(
        {
            "pixels": specs.Box(0, 255, shape=(4, 4, 3), dtype=torch.uint8),
            "velocity": specs.Box(-1.0, 1.0, shape=(2,)),
        }
    )
    action_spec = specs.Box(-2.0, 2.0, shape=(1,))
    print(obs_spec)
    obs = obs_spec.sample(key, batch_shape=(16,))
    print("sample(batch 16) inside the spec:", bool(obs_spec.contains(obs)))
    print("project([[3.5]]) into", action_spec, "->", action_spec.project(torch.tensor([[3.5]])))

    _section("pytrees: one state for 16 envs")
    print(tree.summary(obs))


def demo_envs() -> None:
    """4096 pure CartPoles stepped as one batch, a rollout, and Pong through ale-py."""
    from fxrl import envs
    from fxrl import transforms as T
    from fxrl.rollout import rollout

    _section("4096 pure CartPoles: one batch, one rollout")
    env = envs.make("CartPole-v1")
    many = envs.batch(env, 4096)
    print(many)

    def policy(params: None, obs: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        return random.randint(key, obs.shape[:-1], 0, 2)

    start = time.perf_counter()
    state, _ = many.reset(random.key(5))
    state, traj = rollout(many, policy, None, state, random.key(6), num_steps=100)
    ended = traj["terminated"] | traj["truncated"]
    print(
        f"100 steps x 4096 envs in {time.perf_counter() - start:.2f} s (eager); "
        f"{int(ended.sum())} episodes ended, mean return "
        f"{float(traj['info']['episode_return'][ended].mean()):.1f} (random policy)"
    )

    _section("Pong through ale-py, preprocessed by the transforms a policy uses too")
    try:
        pong = envs.atari("Pong")
    except ImportError as err:  # the `atari` extra is optional
        print(f"skipped: {err}")
        return
    pre = T.compose(T.to_tensor_image(), T.resize(84, "nearest"), T.grayscale())
    wrapped = envs.transform(pong, pre)
    state, ts = wrapped.reset(random.key(7))
    for action in wrapped.action_spec.sample(random.key(8), (100,)):
        state, ts = wrapped.step(state, action)
    print(
        "raw screen",
        list(pong.observation_spec.shape),
        "-> policy input",
        list(ts.obs.shape),
        ts.obs.dtype,
    )


def demo_ensemble() -> None:
    """32 Q-networks trained in one vmapped call: params are dicts, Adam is a pure function."""
    from fxrl import nn, optim

    _section("an ensemble of 32 MLPs, one vmapped Adam step at a time")
    model = nn.mlp(4, 1, hidden=(64, 64), activation="tanh")
    opt = optim.adam(1e-2)
    key_x, key_init = random.split(random.key(1))
    x = random.normal(key_x, (256, 4))
    y = (x * torch.tensor([1.0, -2.0, 0.5, 3.0])).sum(-1, keepdim=True)

    def loss(params: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (model.apply(params, x) - y).square().mean()

    def train_step(params: dict, opt_state: object) -> tuple[dict, object, torch.Tensor]:
        grads, value = torch.func.grad_and_value(loss)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, value

    params = torch.func.vmap(model.init)(random.split(key_init, 32))
    opt_state = torch.func.vmap(opt.init)(params)
    step = torch.func.vmap(train_step)
    for i in range(201):
        params, opt_state, losses = step(params, opt_state)
        if i % 50 == 0:
            print(
                f"step {i:3d}: loss of the 32 members min {losses.min():.4f} max {losses.max():.4f}"
            )


def demo_export() -> None:
    """A policy traced once and run by ONNX Runtime, with the same actions as eager."""
    import tempfile
    from pathlib import Path

    from fxrl import distributions, nn
    from fxrl.export import export, load_onnx, to_onnx

    _section("export a stochastic policy to ONNX Runtime")
    actor = nn.mlp(8, 2 * 2, hidden=(64, 64))

    def policy(
        params: dict, obs: torch.Tensor, key: torch.Tensor | None = None, mode: str = "mode"
    ) -> torch.Tensor:
        loc, scale = distributions.normal_param_extractor(actor.apply(params, obs))
        return distributions.draw(distributions.tanh_normal(loc, scale), key, mode)

    params = actor.init(random.key(2))
    obs = random.normal(random.key(3), (4, 8))
    exported = export(policy, params, obs, mode="random")
    with tempfile.TemporaryDirectory() as tmp:
        path = to_onnx(exported, Path(tmp) / "policy.onnx")
        deployed = load_onnx(path)
        key = random.key(4)
        eager = policy(params, obs, key, mode="random")
        onnx_action = torch.from_numpy(deployed(obs.numpy(), key.numpy()))
    print("inputs:", [i["name"] for i in exported.inputs], "-> ONNX file, params baked in")
    print(
        "same key, same actions in eager and ONNX Runtime:",
        bool(torch.allclose(eager, onnx_action, atol=1e-5)),
    )


def main(threads: int = 2) -> None:
    """Run every part of the tour."""
    torch.set_num_threads(threads)
    start = time.perf_counter()
    demo_foundation()
    demo_envs()
    demo_ensemble()
    demo_export()
    print(f"\ntour finished in {time.perf_counter() - start:.1f} s")

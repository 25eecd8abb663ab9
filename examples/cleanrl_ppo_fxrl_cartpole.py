"""A CleanRL-style PPO (one file, gymnasium VectorEnv API) on fxrl's batched CartPole.

The agent and its loop are CleanRL's ``ppo.py`` shape, untouched by fxrl: it talks to a
``gymnasium.vector.VectorEnv``. Only the line that builds the envs differs:

    envs = fxrl.envs.to_gymnasium(fxrl.envs.batch(fxrl.envs.make("CartPole-v1"), 8))

``--backend gymnasium`` runs the same loop on gymnasium's own SyncVectorEnv (SAME_STEP
autoreset, the mode fxrl's in-step auto-reset maps to), so the two can be compared.

    python examples/cleanrl_ppo_fxrl_cartpole.py --total-timesteps 100000
"""

from __future__ import annotations

import dataclasses
import json
import time

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from torch.distributions.categorical import Categorical

import fxrl


@dataclasses.dataclass
class Args:
    backend: str = "fxrl"
    """"fxrl" (to_gymnasium over a batch of fxrl CartPoles) or "gymnasium" (SyncVectorEnv)"""
    total_timesteps: int = 100_000
    """env steps, all envs together"""
    num_envs: int = 8
    """parallel envs"""
    num_steps: int = 128
    """steps per env per rollout"""
    learning_rate: float = 2.5e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    seed: int = 1


def make_envs(args: Args) -> gym.vector.VectorEnv:
    if args.backend == "fxrl":
        envs = fxrl.envs.to_gymnasium(fxrl.envs.batch(fxrl.envs.make("CartPole-v1"), args.num_envs))
    elif args.backend == "gymnasium":
        envs = gym.make_vec(
            "CartPole-v1", args.num_envs, vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        )  # fmt: skip
    else:
        raise ValueError(f"--backend must be 'fxrl' or 'gymnasium', got {args.backend!r}.")
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs: gym.vector.VectorEnv) -> None:
        super().__init__()
        n_obs = int(np.prod(envs.single_observation_space.shape))
        n_act = envs.single_action_space.n
        self.critic = nn.Sequential(
            layer_init(nn.Linear(n_obs, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )  # fmt: skip
        self.actor = nn.Sequential(
            layer_init(nn.Linear(n_obs, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, n_act), std=0.01),
        )  # fmt: skip

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def train(args: Args) -> list[dict]:
    """CleanRL's PPO loop; returns one log line per finished episode."""
    torch.manual_seed(args.seed)  # a script, as CleanRL's: the agent uses torch's RNG
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size
    envs = make_envs(args)
    agent = Agent(envs)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    obs = torch.zeros((args.num_steps, args.num_envs, *envs.single_observation_space.shape))
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long)
    logprobs, rewards, dones, values = (
        torch.zeros((args.num_steps, args.num_envs)) for _ in range(4)
    )

    log, global_step, start = [], 0, time.perf_counter()
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs, next_done = torch.Tensor(next_obs), torch.zeros(args.num_envs)
    for iteration in range(1, num_iterations + 1):
        frac = 1.0 - (iteration - 1.0) / num_iterations
        optimizer.param_groups[0]["lr"] = frac * args.learning_rate
        # collect
        for step in range(args.num_steps):
            global_step += args.num_envs
            obs[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step], actions[step], logprobs[step] = value.flatten(), action, logprob
            next_obs, reward, terminations, truncations, infos = envs.step(action.numpy())
            next_done = torch.Tensor(np.logical_or(terminations, truncations))
            rewards[step], next_obs = torch.tensor(reward).view(-1), torch.Tensor(next_obs)
            if "episode" in infos:
                for i in np.flatnonzero(infos["_episode"]):
                    log.append({"step": global_step, "return": float(infos["episode"]["r"][i]),
                                "seconds": round(time.perf_counter() - start, 2)})  # fmt: skip
        # advantages (GAE)
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                nextnonterminal = 1.0 - (next_done if t == args.num_steps - 1 else dones[t + 1])
                nextvalues = next_value if t == args.num_steps - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                advantages[t] = lastgaelam
            returns = advantages + values
        # learn
        b_obs = obs.reshape((-1, *envs.single_observation_space.shape))
        b_logprobs, b_actions = logprobs.reshape(-1), actions.reshape(-1)
        b_advantages, b_returns, b_values = (
            advantages.reshape(-1),
            returns.reshape(-1),
            values.reshape(-1),
        )
        b_inds = np.arange(batch_size)
        for _ in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for begin in range(0, batch_size, minibatch_size):
                mb = b_inds[begin : begin + minibatch_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb], b_actions[mb]
                )
                ratio = (newlogprob - b_logprobs[mb]).exp()
                mb_adv = b_advantages[mb]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(
                    -mb_adv * ratio,
                    -mb_adv * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef),
                ).mean()
                v_clipped = b_values[mb] + torch.clamp(
                    newvalue.view(-1) - b_values[mb], -args.clip_coef, args.clip_coef
                )
                v_loss = (
                    0.5
                    * torch.max(
                        (newvalue.view(-1) - b_returns[mb]) ** 2, (v_clipped - b_returns[mb]) ** 2
                    ).mean()
                )
                loss = pg_loss - args.ent_coef * entropy.mean() + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
    envs.close()
    return log


if __name__ == "__main__":
    args = tyro.cli(Args)
    torch.set_num_threads(1)
    episodes = train(args)
    last = [e["return"] for e in episodes[-20:]]
    print(json.dumps({"backend": args.backend, "episodes": len(episodes),
                      "mean_return_last_20": float(np.mean(last)) if last else None,
                      "seconds": episodes[-1]["seconds"] if episodes else None}))  # fmt: skip

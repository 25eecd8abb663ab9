"""RL losses as pure functions returning ``(loss, metrics)``.

Every loss takes ``apply`` functions and params pytrees, returns a scalar loss and a
dict of detached metric tensors, and composes with torch.func:

    grads, metrics = torch.func.grad(dqn_loss, argnums=1, has_aux=True)(
        q_apply, params, target_params, batch, gamma=0.99)
    # an ensemble (or seeds): params and batch with a leading dim
    torch.func.vmap(grad_fn, in_dims=(None, 0, 0, 0))(q_apply, params, target_params, batch)

Randomness (TD3's target noise, SAC's action draws) comes only from a ``key`` argument.
The files: ``q_losses`` (DQN), ``policy_gradient`` (PPO, A2C), ``actor_critic`` (DDPG,
TD3), ``sac`` (SAC, discrete SAC); the quantities they are made of are public in
``fxrl.objectives.blocks`` (with ``soft_update`` and ``hard_update``).
"""

from __future__ import annotations

from fxrl.objectives.actor_critic import ddpg_loss, td3_loss

# soft_update and hard_update are importable from here too (DESIGN lists them with the
# losses); blocks' __all__ exports them from fxrl.objectives.
from fxrl.objectives.blocks import hard_update as hard_update
from fxrl.objectives.blocks import soft_update as soft_update
from fxrl.objectives.policy_gradient import a2c_loss, ppo_loss
from fxrl.objectives.q_losses import dqn_loss
from fxrl.objectives.sac import discrete_sac_loss, sac_loss

__all__ = [
    "a2c_loss",
    "ddpg_loss",
    "discrete_sac_loss",
    "dqn_loss",
    "ppo_loss",
    "sac_loss",
    "td3_loss",
]

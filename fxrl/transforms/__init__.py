"""Pure observation and reward transforms, usable on both sides of the policy.

The same object wraps an env (``fxrl.envs.transform(env, t)``) during training and
preprocesses observations in front of a policy (``t(obs)``), so an exported policy can
read raw uint8 screens::

    pre = compose(to_tensor_image(), resize(84, 84), grayscale())
    env = fxrl.envs.transform(atari_env, pre, frame_stack(4, dim=-3))
    action = policy(params, pre(raw_screen))  # same numbers as inside the env

A transform is a small object with pure methods (all optional but ``__call__``):

- ``t(obs, state=None) -> obs``: the observation map. Works on any leading batch dims.
- ``observation_spec(spec) -> spec``.
- ``init(obs, spec) -> state`` when an episode starts, ``update(state, timestep) ->
  state`` after each step (with the untransformed TimeStep), and ``timestep(state, ts)
  -> ts`` to change reward, flags or info. The state lives in the env state pytree, so
  vmap and compile see it; stateless transforms keep ``()``.
- ``persistent``: the state outlives episodes (running statistics) instead of
  restarting with them (frame stacks, step counts).

A stateful transform called on a bare observation acts as at the start of an episode
(``frame_stack(4)(obs)`` repeats ``obs``); pass ``state`` to act mid-episode, and keep it
with ``init`` and ``push``/``update`` on the policy side.

One module per kind: ``base`` (the ``Transform`` protocol), ``images``, ``values``
(normalisation, clipping, reward scale), ``episodes`` (frame stacks, step counts and
the time limit, episode statistics, no-op starts) and ``structure`` (cat, select,
compose). Every name is used from here: ``fxrl.transforms.frame_stack``.
"""

from fxrl.transforms.base import Transform
from fxrl.transforms.episodes import EpisodeStats as EpisodeStats
from fxrl.transforms.episodes import FrameStack as FrameStack
from fxrl.transforms.episodes import NoopReset as NoopReset
from fxrl.transforms.episodes import StepCounter as StepCounter
from fxrl.transforms.episodes import frame_stack, noop_reset, step_counter
from fxrl.transforms.episodes import truncate_at as truncate_at
from fxrl.transforms.images import Grayscale as Grayscale
from fxrl.transforms.images import Resize as Resize
from fxrl.transforms.images import ToTensorImage as ToTensorImage
from fxrl.transforms.images import grayscale, resize, to_tensor_image
from fxrl.transforms.structure import Cat as Cat
from fxrl.transforms.structure import Compose, cat, compose, select
from fxrl.transforms.structure import Select as Select
from fxrl.transforms.values import Clip as Clip
from fxrl.transforms.values import ObservationNorm as ObservationNorm
from fxrl.transforms.values import RewardScale as RewardScale
from fxrl.transforms.values import RunningObservationNorm as RunningObservationNorm
from fxrl.transforms.values import RunningStats as RunningStats
from fxrl.transforms.values import clip, observation_norm, reward_scale

__all__ = [
    "Compose",
    "EpisodeStats",
    "Transform",
    "cat",
    "clip",
    "compose",
    "frame_stack",
    "grayscale",
    "noop_reset",
    "observation_norm",
    "resize",
    "reward_scale",
    "select",
    "step_counter",
    "to_tensor_image",
]

"""The run: the Python loop around an algorithm's pure ``update`` (what ``fxrl train`` runs).

    from fxrl import run
    from fxrl.algorithms import ppo
    result = run.train("ppo", ppo.Config(total_steps=100_000), "runs/cartpole", num_seeds=8)
    result = run.resume("runs/cartpole")                   # after a crash or Ctrl-C: exact
    run.evaluate_run("runs/cartpole", episodes=10, gymnasium=True)
    run.export_run("runs/cartpole", "onnx")                # runs/cartpole/policy.onnx
    run.plot_runs(["runs/cartpole", "runs/other"], "compare.png")
    run.train("ppo", ppo.Config(), "runs/sweep", num_seeds=4,
              sweep={"lr": [1e-4, 3e-4], "ent_coef": [0.0, 0.01]})  # one vmapped update
    run.train("ppo", ppo.Config(), "runs/poles", tasks=8,
              task_ranges={"length": (0.25, 1.0)})  # a task ensemble, one vmapped update

Modules: ``loop`` (train/resume; SIGTERM and SIGUSR1 stop a run as Ctrl-C does),
``checkpoint`` (safetensors, atomic, checked; a write that fails raises ``WriteError`` and
leaves the file as it was), ``lock`` (a run directory held by its live process),
``metrics`` (metrics.jsonl/csv, TensorBoard), ``plots``, ``progress``, ``evaluate``,
``export_run``, ``config_io`` (config.json), ``device`` (``--device``), ``train_flags`` (the
CLI's flags), ``sweep``
(``--sweep``, rows tagged by combination, ``--pick``), ``tasks`` (``--tasks``, task
ensembles' drawn params, rows tagged by task), ``host_run`` (a policy trained from Python
on a host env, such as ALE Pong, saved as a run directory that ``fxrl eval`` and ``fxrl
export`` read), ``demo``.
"""

from fxrl.run import checkpoint
from fxrl.run.checkpoint import CheckpointError, WriteError
from fxrl.run.evaluate import evaluate_run, load_run
from fxrl.run.export_run import export_run
from fxrl.run.lock import RunLockedError
from fxrl.run.loop import InexactResumeWarning, NonFiniteError, RunResult, resume, train
from fxrl.run.plots import plot_runs

__all__ = [
    "CheckpointError",
    "InexactResumeWarning",
    "NonFiniteError",
    "RunLockedError",
    "RunResult",
    "WriteError",
    "checkpoint",
    "evaluate_run",
    "export_run",
    "load_run",
    "plot_runs",
    "resume",
    "train",
]

"""RayCollector on a local 2-CPU Ray cluster: its batches equal fxrl.collector's for the
same keys and params, also when a worker is SIGKILLed mid-run; params versions reach every
worker; env errors name the worker and env; nothing of Ray outlives the module.

Starting a worker is a Python process that imports Ray, torch and fxrl (most of this file's
time), so the tests that are not about starting workers share two running ones, handed
from collector to collector with ``RayCollector(workers=...)`` (the ``warm`` fixture)."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from fxrl import envs, random, tree
from fxrl.collector import collector

ray = pytest.importorskip("ray")
from fxrl.distributed import RayCollector, WorkerError  # noqa: E402

NUM_ENVS = 2  # per worker


def _make_env() -> envs.Env:
    return envs.batch(envs.make("CartPole-v1"), NUM_ENVS)


def _pieces(sleep_s: float = 0.0):
    """make_env and policy as local functions: cloudpickle sends them by value."""

    def make_env():
        return envs.batch(envs.make("CartPole-v1"), NUM_ENVS)

    def policy(params, obs, key):
        if sleep_s:
            time.sleep(sleep_s)  # a slow env: batches are still in flight when we kill
        logits = obs @ params["w"] + params["b"]
        return random.categorical(key, logits), {"logits": logits}

    return make_env, policy


def _params(scale: float) -> dict:
    return {"w": scale * torch.linspace(-1.0, 1.0, 8).reshape(4, 2), "b": torch.zeros(2)}


def _ray_children() -> list[str]:
    """Command lines of this process's descendants that belong to Ray."""
    children: dict[int, list[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(pid))
    found, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            try:
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "ray" in cmd or "raylet" in cmd or "gcs_server" in cmd:
                found.append(f"{child}: {cmd[:120]}")
    return found


@pytest.fixture(scope="module")
def cluster():
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=200 * 2**20,
        log_to_driver=False,
        configure_logging=False,
    )
    yield
    ray.shutdown()


class _Warm:
    """Two running workers that each new collector takes over from the last one:
    ``warm(make_env, policy, params, key, 2, frames, ...)``. They reserve no CPU
    (``num_cpus=0``), so the tests that start their own workers find the cluster's two
    CPUs free, and restart without limit (kills add up over the tests)."""

    def __init__(self) -> None:
        self.options = {"num_cpus": 0, "max_restarts": -1}
        make_env, policy = _pieces()
        self.last = RayCollector(make_env, policy, _params(1.0), random.key(0), 2, 8, 8,
                                 **self.options)  # fmt: skip

    def __call__(self, *args, **kwargs) -> RayCollector:
        c = RayCollector(*args, workers=self.last, **self.options, **kwargs)
        self.last = c
        return c


@pytest.fixture(scope="module")
def warm(cluster):
    pool = _Warm()
    yield pool
    if ray.is_initialized():
        pool.last.close()


def _reference_streams(make_env, policy, params, key, num_workers, frames):
    return [
        collector(make_env(), policy, params, random.fold_in(key, w), frames, flat=False)
        for w in range(num_workers)
    ]


def _assert_part_equal(part: dict, ref: dict, worker: int, num_workers: int) -> None:
    """``part`` [T, n, ...] from RayCollector against the local collector's batch."""
    for k in ("obs", "action", "reward", "next_obs", "terminated", "truncated"):
        assert torch.equal(part[k], ref[k]), k
    assert torch.equal(part["extras"]["logits"], ref["extras"]["logits"])
    assert torch.equal(part["traj_id"], ref["traj_id"] * num_workers + worker)


def test_sync_batches_equal_local_collectors_and_carry_each_update_version(warm):
    make_env, policy = _pieces()
    key, T = random.key(7), 40
    frames = 2 * NUM_ENVS * T
    refs = _reference_streams(make_env, policy, _params(1.0), key, 2, frames // 2)
    before = warm.last
    pids = before.worker_pids()
    c = warm(make_env, policy, _params(1.0), key, 2, frames, 4 * frames)
    # taken over: the same processes; the collector that had them gave them up unkilled
    assert c.worker_pids() == pids
    with pytest.raises(RuntimeError, match=r"used after another RayCollector took its workers"):
        next(before)
    before.close()  # kills nothing now: the batches below come from these processes
    for i, (batch, stats) in enumerate(c):
        assert stats["params_version"].tolist() == [i, i]
        assert bool((stats["params_fetch_s"] > 0).all())  # a new version on each worker
        assert stats["frames"] == (i + 1) * frames
        assert batch["obs"].shape == (frames, 4)
        unflat = {k: v.reshape(T, 2 * NUM_ENVS, *v.shape[1:]) for k, v in batch.items()
                  if k != "extras"}  # fmt: skip
        unflat["extras"] = {"logits": batch["extras"]["logits"].reshape(T, -1, 2)}
        for w, ref in enumerate(refs):
            ref_batch, _ = next(ref)
            cut = slice(w * NUM_ENVS, (w + 1) * NUM_ENVS)
            _assert_part_equal({k: v[:, cut] for k, v in unflat.items() if k != "extras"}
                               | {"extras": {"logits": unflat["extras"]["logits"][:, cut]}},
                               ref_batch, w, 2)  # fmt: skip
        # new params for the next batch, here and in the reference
        c.update(_params(1.0 + 0.5 * (i + 1)))
        for ref in refs:
            ref.update(_params(1.0 + 0.5 * (i + 1)))
    assert i == 3 and c.frames == 4 * frames
    assert c.worker_pids() == pids


def _run_async_with_kill(c, pids_before, kill_after: int) -> list:
    got = []
    for n, (batch, stats) in enumerate(c):
        got.append((stats["worker"], stats["index"], batch, stats))
        if n == kill_after:
            os.kill(pids_before[0], signal.SIGKILL)
    return got


def test_sigkill_of_a_worker_mid_run_loses_and_duplicates_no_batch(warm):
    # on taken-over workers: the restarted process (Ray runs __init__ again) builds this
    # collector's env and policy from the task it is given
    make_env, policy = _pieces(sleep_s=0.01)
    key, T, batches = random.key(11), 20, 8
    frames = NUM_ENVS * T
    c = warm(make_env, policy, _params(1.0), key, 2, frames, batches * frames, sync=False)
    pids = c.worker_pids()
    got = _run_async_with_kill(c, pids, kill_after=0)
    assert c.resubmitted >= 1  # worker 0's batch was in flight when it died
    assert c.worker_pids()[0] != pids[0]  # Ray restarted it
    assert c.frames == batches * frames
    seen = sorted((w, i) for w, i, _, _ in got)
    assert len(seen) == batches and len(set(seen)) == batches  # every batch exactly once
    refs = _reference_streams(make_env, policy, _params(1.0), key, 2, frames)
    for w in range(2):
        mine = sorted((i, b) for ww, i, b, _ in got if ww == w)
        assert [i for i, _ in mine] == list(range(len(mine)))
        for _, batch in mine:
            ref_batch, _ = next(refs[w])
            unflat = {k: v.reshape(T, NUM_ENVS, *v.shape[1:]) for k, v in batch.items()
                      if k != "extras"}  # fmt: skip
            unflat["extras"] = {"logits": batch["extras"]["logits"].reshape(T, NUM_ENVS, 2)}
            _assert_part_equal(unflat, ref_batch, w, 2)


def test_sigkill_during_a_sync_batch_gives_the_same_batches(warm):
    make_env, policy = _pieces(sleep_s=0.01)
    key, T = random.key(5), 20
    frames = 2 * NUM_ENVS * T
    c = warm(make_env, policy, _params(2.0), key, 2, frames, 3 * frames)
    pid = c.worker_pids()[1]
    first = next(c)[0]
    killer = threading.Timer(0.1, os.kill, (pid, signal.SIGKILL))
    killer.start()  # worker 1 dies while the second batch is being collected
    rest = [b for b, _ in c]
    killer.join()
    assert c.resubmitted >= 1 and c.frames == 3 * frames
    # the batches an uninterrupted collection gives: each worker's stream from the local
    # collector (which a clean RayCollector's batches equal, as the first test checks)
    refs = _reference_streams(make_env, policy, _params(2.0), key, 2, frames // 2)
    assert len([first, *rest]) == 3
    for got in [first, *rest]:
        parts = _unflatten(got, T, 2 * NUM_ENVS)
        for w, ref in enumerate(refs):
            cut = slice(w * NUM_ENVS, (w + 1) * NUM_ENVS)
            part = {k: v[:, cut] for k, v in parts.items() if k != "extras"}
            part["extras"] = {"logits": parts["extras"]["logits"][:, cut]}
            _assert_part_equal(part, next(ref)[0], w, 2)


def test_an_env_that_raises_gives_an_error_naming_the_worker_and_env(warm):
    def make_env():
        class Exploding(envs.core.Wrapper):
            def reset(self, key, params=None):
                return self.env.reset(key, params)

            def step(self, state, action):
                raise FloatingPointError("pole fell through the floor")

        return Exploding(envs.batch(envs.make("CartPole-v1"), NUM_ENVS))

    _, policy = _pieces()
    c = warm(make_env, policy, _params(1.0), random.key(0), 2, 8, timeout_s=60)
    start = time.perf_counter()
    with pytest.raises(WorkerError, match=r"worker \d \(env exploding\(batch\(.*pole fell"):
        next(c)
    assert time.perf_counter() - start < 60


def test_the_ray_tutorial_example_runs(cluster):
    # The Ray tutorial's blocks are marked <!-- skip-test --> so tests/test_docs.py (no
    # cluster) only parses them; they run here, on the cluster, one after the other.
    page = (Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "ray.md").read_text()
    first, reuse = re.findall(r"<!-- skip-test -->\n```python\n(.*?)```", page, flags=re.S)
    namespace = {"__name__": "docs_ray"}
    exec(compile(first, "docs/tutorials/ray.md[Ray block]", "exec"), namespace)
    assert namespace["params"]["w"][0, 0] == pytest.approx(0.1)  # ten updates of 0.01
    exec(compile(reuse, "docs/tutorials/ray.md[reuse block]", "exec"), namespace)
    assert namespace["c"].workers == [] and namespace["ev"].frames == 1024
    assert len(namespace["returns"]) == 2


def test_bad_arguments_are_named_before_any_worker_starts():
    make_env, policy = _pieces()
    with pytest.raises(ValueError, match=r"frames_per_batch=9 does not split evenly over "):
        RayCollector(make_env, policy, _params(1.0), random.key(0), 2, 9)
    with pytest.raises(TypeError, match=r"make_env must be a zero-argument callable"):
        RayCollector(make_env(), policy, _params(1.0), random.key(0), 2, 8)
    with pytest.raises(ValueError, match=r"num_workers must be a positive int, got 0"):
        RayCollector(make_env, policy, _params(1.0), random.key(0), 0, 8)


def test_frames_per_batch_not_a_multiple_of_the_envs_is_refused(warm):
    make_env, policy = _pieces()
    with pytest.raises(ValueError, match=r"each worker collects 3 frames per batch, not a"):
        warm(make_env, policy, _params(1.0), random.key(0), 2, 6)


def test_workers_taken_over_must_be_as_many_and_started_alike(warm):
    make_env, policy = _pieces()
    args = (make_env, policy, _params(1.0), random.key(0))
    with pytest.raises(ValueError, match=r"workers= has 2 workers; num_workers is 1\."):
        RayCollector(*args, 1, 8, workers=warm.last, **warm.options)
    with pytest.raises(ValueError, match=r"workers= were started with num_cpus=0, "
                       r"max_restarts=-1; got num_cpus=1, max_restarts=3"):  # fmt: skip
        RayCollector(*args, 2, 8, workers=warm.last)
    with pytest.raises(TypeError, match=r"workers must be another RayCollector .* got list"):
        RayCollector(*args, 2, 8, workers=warm.last.workers)


# That `import fxrl` imports no ray, and that fxrl.distributed names the extra where ray is
# missing: tests/test_import.py (its `import fxrl` interpreter).


def _unflatten(batch: dict, T: int, n: int) -> dict:
    out = {k: v.reshape(T, n, *v.shape[1:]) for k, v in batch.items() if k != "extras"}
    out["extras"] = {"logits": batch["extras"]["logits"].reshape(T, n, 2)}
    return out


def test_an_unbatched_env_gives_the_local_collectors_batches_in_both_modes(warm):
    def make_env():
        return envs.make("CartPole-v1")  # batch_shape (): one env per worker

    _, policy = _pieces()
    key, T = random.key(3), 12
    for sync in (True, False):
        frames = 2 * T if sync else T
        per_worker = frames // 2 if sync else frames
        refs = _reference_streams(make_env, policy, _params(1.0), key, 2, per_worker)
        got = {}
        c = warm(make_env, policy, _params(1.0), key, 2, frames, 4 * frames, sync=sync)
        for batch, stats in c:
            assert batch["obs"].shape == (frames, 4)
            # no update: a worker reads the params once, for its first batch
            assert (torch.as_tensor(stats["params_fetch_s"]) > 0).any() == (stats["index"] == 0)
            if sync:
                parts = _unflatten(batch, T, 2)  # [T, worker, ...]
                for w in range(2):
                    got[(w, stats["index"])] = {
                        k: v[:, w] if k != "extras" else {"logits": v["logits"][:, w]}
                        for k, v in parts.items()
                    }
            else:
                part = _unflatten(batch, T, 1)
                got[(stats["worker"], stats["index"])] = {
                    k: v[:, 0] if k != "extras" else {"logits": v["logits"][:, 0]}
                    for k, v in part.items()
                }
        assert len(got) == 4 * frames // per_worker
        for w in range(2):
            # async: whichever worker is ready first delivers, so the split between the two
            # workers varies from run to run; each worker's batches are still its own stream
            indices = sorted(i for (worker, i) in got if worker == w)
            assert indices == list(range(len(indices)))
            if sync:
                assert len(indices) == len(got) // 2
            for i in indices:
                ref_batch, _ = next(refs[w])
                _assert_part_equal(got[(w, i)], ref_batch, w, 2)


def _stateful_policy():
    """A recurrent-style policy (a local function: cloudpickle sends it by value): the
    carry restarts where ``is_init`` and feeds the logits."""

    def policy(params, obs, carry, is_init, key):
        carry = torch.where(is_init[..., None], torch.zeros_like(carry), carry)
        carry = 0.5 * carry + obs[..., :2]
        logits = obs @ params["w"] + params["b"] + carry
        return (random.categorical(key, logits), {"logits": logits}), carry

    return policy


@pytest.mark.parametrize("host", [False, True], ids=["pure", "gymnasium"])
def test_a_policy_state_continues_across_batches_as_in_the_local_collector(warm, host):
    def make_env():
        if host:
            return envs.gym("CartPole-v1", num_envs=NUM_ENVS)
        return envs.batch(envs.make("CartPole-v1"), NUM_ENVS)

    policy = _stateful_policy()
    key, T, num_batches = random.key(11), 30, 3
    frames = 2 * NUM_ENVS * T
    start = torch.full((NUM_ENVS, 2), 0.25)
    refs = [collector(make_env(), policy, _params(1.0), random.fold_in(key, w),
                      frames // 2, flat=False, policy_state=start)
            for w in range(2)]  # fmt: skip
    c = warm(make_env, policy, _params(1.0), key, 2, frames, num_batches * frames,
             policy_state=start, flat=False)  # fmt: skip
    for batch, _ in c:
        for w, ref in enumerate(refs):
            want, _ = next(ref)
            cut = slice(w * NUM_ENVS, (w + 1) * NUM_ENVS)
            part = tree.map(lambda x, cut=cut: x[:, cut], batch)
            _assert_part_equal(part, want, w, 2)
            for k in ("is_init", "policy_state", "next_policy_state"):
                assert torch.equal(part[k], want[k]), k
    assert all(ref.batches == num_batches for ref in refs)
    # episodes ended inside the last batch, so the carry's resets were compared too
    assert int(batch["is_init"][1:].sum()) > 0


def test_a_policy_state_of_the_wrong_shape_is_a_one_line_error(warm):
    make_env, _ = _pieces()
    with pytest.raises(ValueError, match=r"RayCollector: policy_state has a leaf \[3, 2\]; "
                       r"expected tensors \[2, \.\.\.\]"):  # fmt: skip
        warm(make_env, _stateful_policy(), _params(1.0), random.key(0), 2, 8,
             policy_state=torch.zeros(3, 2))  # fmt: skip


def test_a_make_env_that_raises_at_start_names_the_worker_and_make_env(warm):
    def make_broken_env():
        raise OSError("no ROM for Pong here")

    _, policy = _pieces()
    error = (r"worker 0 did not start: make_env .*make_broken_env raised OSError: no ROM for "
             r"Pong here")  # fmt: skip
    start = time.perf_counter()
    with pytest.raises(WorkerError, match=error):
        RayCollector(make_broken_env, policy, _params(1.0), random.key(0), 2, 8, timeout_s=60)
    assert time.perf_counter() - start < 60
    # the same on workers taken over, which then stay with the collector that had them
    pids = warm.last.worker_pids()
    with pytest.raises(WorkerError, match=error):
        warm(make_broken_env, policy, _params(1.0), random.key(0), 2, 8, timeout_s=60)
    assert warm.last.worker_pids() == pids


def test_a_make_env_that_raises_on_a_restart_names_the_worker_and_make_env(warm, tmp_path):
    broken = tmp_path / "broken"

    def make_env():
        if broken.exists():
            raise OSError("the ROM went away")
        return envs.batch(envs.make("CartPole-v1"), NUM_ENVS)

    _, policy = _pieces()
    c = warm(make_env, policy, _params(1.0), random.key(0), 2, 8, timeout_s=60)
    next(c)
    broken.touch()
    os.kill(c.worker_pids()[0], signal.SIGKILL)
    error = r"make_env .*make_env raised OSError: the ROM went away"
    with pytest.raises(WorkerError, match=r"worker 0 restarted but did not start again: " + error):
        c.worker_pids()
    with pytest.raises(WorkerError, match=r"worker 0 \(env .*\) failed on batch 1 of stream 0: "
                       r"RayCollector worker 0: " + error):  # fmt: skip
        next(c)


def test_host_env_workers_killed_twice_with_max_resubmits_zero_lose_no_batch(warm):
    def make_env():
        return envs.gym("CartPole-v1", num_envs=NUM_ENVS)

    def policy(params, obs, key):
        time.sleep(0.01)
        return random.categorical(key, obs @ params["w"] + params["b"])

    T, batches = 10, 10
    frames = NUM_ENVS * T
    c = warm(make_env, policy, _params(1.0), random.key(2), 2, frames, batches * frames,
             sync=False, max_resubmits=0)  # fmt: skip
    seen, kills = [], 0
    for batch, stats in c:
        seen.append((stats["worker"], stats["index"]))
        assert batch["obs"].shape == (frames, 4)
        if stats["worker"] == 0 and kills < 2:
            # worker 0's next task goes to it while Ray restarts it (after the second
            # kill: a restarted worker dies again)
            os.kill(c.worker_pids()[0], signal.SIGKILL)
            kills += 1
    assert kills == 2 and c.resubmitted >= 1
    assert c.frames == batches * frames
    assert len(seen) == batches and len(set(seen)) == batches
    for w in range(2):
        mine = sorted(i for ww, i in seen if ww == w)
        assert mine == list(range(len(mine)))


def test_a_worker_dead_for_good_has_its_stream_finished_by_the_other(cluster):
    make_env, policy = _pieces(sleep_s=0.01)
    key, T, batches = random.key(4), 20, 8
    frames = NUM_ENVS * T
    with RayCollector(make_env, policy, _params(1.0), key, 2, frames, batches * frames,
                      sync=False, max_restarts=0) as c:  # fmt: skip
        got = _run_async_with_kill(c, c.worker_pids(), kill_after=0)
        assert c.resubmitted >= 1 and c.frames == batches * frames
    seen = sorted((w, i) for w, i, _, _ in got)
    assert len(set(seen)) == batches == len(seen)
    refs = _reference_streams(make_env, policy, _params(1.0), key, 2, frames)
    for w in range(2):
        for _, batch in sorted((i, b) for ww, i, b, _ in got if ww == w):
            _assert_part_equal(_unflatten(batch, T, NUM_ENVS), next(refs[w])[0], w, 2)


def test_a_host_env_worker_dead_for_good_raises_instead_of_waiting(cluster):
    def make_env():
        return envs.gym("CartPole-v1", num_envs=NUM_ENVS)

    def policy(params, obs, key):
        time.sleep(0.01)
        return random.categorical(key, obs @ params["w"] + params["b"])

    c = RayCollector(make_env, policy, _params(1.0), random.key(0), 2, NUM_ENVS * 10,
                     sync=False, max_restarts=0, timeout_s=120)  # fmt: skip
    next(c)
    start = time.perf_counter()
    os.kill(c.worker_pids()[0], signal.SIGKILL)
    with pytest.raises(WorkerError, match=r"workers \[0\] died and will not restart"):
        for _ in range(200):  # worker 1 goes on delivering until the loss surfaces
            next(c)
    assert time.perf_counter() - start < 60
    c.close()


def test_compiled_workers_equal_a_compiled_local_collector_and_restart_from_the_cache(cluster):
    import fxrl

    make_env, policy = _pieces()
    key, T = random.key(9), 16
    frames = NUM_ENVS * T
    with RayCollector(make_env, policy, _params(1.0), key, 1, frames, 3 * frames,
                      sync=False, compile=True, timeout_s=600) as c:  # fmt: skip
        first = next(c)[0]
        os.kill(c.worker_pids()[0], signal.SIGKILL)
        rest = [b for b, _ in c]
        restarted = c.info[0]
        assert c.resubmitted >= 1
    # the restarted worker compiled again from inductor's on-disk graph cache
    assert restarted["compile_cache"].get("fxgraph_cache_hit", 0) >= 1, restarted
    assert restarted["compile_cache"].get("fxgraph_cache_miss", 0) == 0, restarted
    env = make_env()
    env.step = fxrl.compile(env.step)
    ref = collector(env, policy, _params(1.0), random.fold_in(key, 0), frames, flat=False)
    for batch in [first, *rest]:
        ref_batch, _ = next(ref)
        _assert_part_equal(_unflatten(batch, T, NUM_ENVS), ref_batch, 0, 1)


# Last in the file: it shuts the module's cluster down.
def test_close_and_shutdown_leave_no_ray_processes(warm):
    make_env, policy = _pieces()
    killed = warm.last.worker_pids()[0]
    os.kill(killed, signal.SIGKILL)
    # taken over while Ray restarts worker 0: the new collector waits for it
    c = warm(make_env, policy, _params(1.0), random.key(0), 2, 8, 8)
    pids = c.worker_pids()
    assert pids[0] != killed
    assert len(list(c)) == 1
    c.close()
    with pytest.raises(ValueError, match=r"workers= names a collector without workers"):
        RayCollector(make_env, policy, _params(1.0), random.key(0), 2, 8, workers=c,
                     **warm.options)  # fmt: skip
    ray.shutdown()
    deadline = time.monotonic() + 30
    while (_ray_children() or any(_alive(p) for p in pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids)
    assert _ray_children() == []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

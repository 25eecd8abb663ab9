"""What a run shows: the compile as its own phase (a spinner with the seconds and what is
compiled, then how long it took or that it came from the cache), then steps/s counted
after the compile; on a terminal (rich, captured from a stream that says it is one) and
as plain lines."""

import io
import json
import re
import time

import counter_algo
import pytest
import torch

from fxrl.compile import CompileRecord
from fxrl.compile import compile as fxrl_compile
from fxrl.run.loop import train
from fxrl.run.progress import Progress, compile_summary


class Terminal(io.StringIO):
    """A stream rich draws live displays on, as on a terminal."""

    def isatty(self) -> bool:
        return True


def fresh_function(delay: float = 0.0):
    """A function whose graph inductor has not seen (a constant of this moment), and which
    takes at least ``delay`` seconds to trace."""
    salt = float(time.time_ns() % 1_000_000_007)

    def f(x):
        time.sleep(delay)  # runs while make_fx traces, i.e. during the compile
        return x * 2.0 + salt

    return f


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


@pytest.fixture(autouse=True)
def terminal_env(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("COLUMNS", "160")
    for name in ("NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)


OPTIONS = {"cpp_wrapper": False}  # the Python wrapper: the cheapest compile


def test_on_a_terminal_the_compile_is_a_spinner_with_seconds_then_a_line_then_the_bar():
    fn, stream = fresh_function(delay=1.5), Terminal()
    with Progress(64, num_seeds=2, stream=stream) as bar:
        with bar.compiling("the toy update (2 seeds)") as built:
            fxrl_compile(fn, options=OPTIONS)(torch.ones(3))
        for steps in (16, 32, 48, 64):
            bar.update(steps, [{"seed": 0, "episode_return": 10.0}])
    text = strip_ansi(stream.getvalue())
    [record] = built
    assert not record.from_cache and record.seconds >= 1.5
    # the spinner's frames: what is compiled and the seconds elapsed, counting up
    seconds = [int(s) for s in re.findall(r"compiling the toy update \(2 seeds\)\s+(\d+) s", text)]
    assert seconds and max(seconds) >= 1 and seconds == sorted(seconds), text
    assert f"the toy update (2 seeds): compiled in {record.seconds:.1f} s" in text
    after = text[text.index("compiled in") :]
    assert "64/64" in after and "steps/s" in after and "━" in after  # then the bar
    assert "compiling" not in after


def test_a_program_inductor_has_cached_is_said_to_be_loaded_from_the_cache():
    fn, stream = fresh_function(), io.StringIO()
    with Progress(32, stream=stream) as bar:
        for _ in range(2):  # a new compiled function each time: the second finds the cache
            with bar.compiling("the toy update"):
                fxrl_compile(fn, options=OPTIONS)(torch.ones(3))
    first, cached = bar.compiles
    assert not first.from_cache and cached.from_cache
    lines = stream.getvalue().splitlines()
    assert lines == [
        "compiling the toy update ...",
        f"the toy update: compiled in {first.seconds:.1f} s",
        "compiling the toy update ...",
        f"the toy update: loaded from the compile cache in {cached.seconds:.1f} s",
    ]


def test_steps_per_second_are_counted_from_the_first_update_after_the_compile():
    stream = io.StringIO()
    with Progress(48, num_seeds=2, stream=stream, log_every=0.0) as bar:
        with bar.compiling("the toy update"):
            time.sleep(0.5)  # a slow "compile" that also ran the first iteration
        before = time.perf_counter()
        bar.update(16, [])
        after = time.perf_counter()
        time.sleep(0.2)
        end = time.perf_counter()
        bar.update(48, [])
        rate = bar.rate()
        last = time.perf_counter()
    lines = stream.getvalue().splitlines()
    assert lines[2].startswith("steps 16/48  - steps/s")  # nothing to count yet
    # 32 steps x 2 seeds over the time between the two updates, the compile left out
    assert 64 / (last - before) <= rate <= 64 / (end - after)
    shown = re.fullmatch(r"steps 48/48  ([\d,]+) steps/s  return -", lines[3])
    assert (
        64 / (last - before) - 1 <= float(shown.group(1).replace(",", "")) <= 64 / (end - after) + 1
    )


@pytest.mark.parametrize(
    ("records", "line"),
    [
        ([], "u: already compiled in this process (2.0 s)"),
        ([CompileRecord("f", 1.25, True)], "u: loaded from the compile cache in 1.2 s"),
        ([CompileRecord("f", 30.0, False)], "u: compiled in 30.0 s"),
        (
            [CompileRecord("f", 3.0, True), CompileRecord("g", 20.0, False)],
            "u: compiled in 23.0 s (1 of 2 programs loaded from the compile cache)",
        ),
        (
            [CompileRecord("f", 3.0, False), CompileRecord("g", 20.0, False)],
            "u: compiled in 23.0 s (2 programs)",
        ),
    ],
)
def test_the_compile_line_says_how_long_and_what_came_from_the_cache(records, line):
    assert compile_summary("u", records, 2.0) == line


def test_a_compiled_run_shows_its_compile_phase_and_records_it_in_timing_jsonl(tmp_path, capsys):
    salt = float(time.time_ns() % 1_000_000_007)  # a program inductor has not cached
    config = counter_algo.Config(salt=salt)
    for name in ("first", "second"):
        train("counter_algo", config, tmp_path / name, num_seeds=2, quiet=True)
    out = capsys.readouterr().out.splitlines()
    what = "the counter_algo update (2 seeds, CartPole-v1)"
    assert out.count(f"compiling {what} ...") == 2
    compiled = [ln for ln in out if ln.startswith(f"{what}: ")]
    assert re.fullmatch(rf"{re.escape(what)}: compiled in \d+\.\d s", compiled[0]), compiled
    assert re.fullmatch(
        rf"{re.escape(what)}: loaded from the compile cache in \d+\.\d s", compiled[1]
    )
    timing = [json.loads((tmp_path / n / "timing.jsonl").read_text()) for n in ("first", "second")]
    assert [t["compile_from_cache"] for t in timing] == [False, True]
    assert all(t["compile_s"] > 0 for t in timing)
    eager = train(
        "counter_algo", config, tmp_path / "eager", num_seeds=2, quiet=True, compile=False
    )
    assert eager.steps == 64 and "compiling" not in capsys.readouterr().out
    assert json.loads((tmp_path / "eager" / "timing.jsonl").read_text())["compile_s"] is None

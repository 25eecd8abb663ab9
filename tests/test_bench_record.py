"""bench/record.py: a benchmark's JSON lines kept under a header naming how they were made,
written whole or not at all."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import record  # noqa: E402  (bench/record.py)

FAKE = """
import json, sys
print(json.dumps({"bench": "fake", "threads": 3}))
print("not json: goes to stderr")
print(json.dumps({"case": "a", "impl": "x", "ms": 1.5, "args": sys.argv[1:]}))
print(json.dumps([1, 2]))
sys.exit(int("--fail" in sys.argv))
"""


@pytest.fixture
def bench_dir(tmp_path: Path) -> Path:
    d = tmp_path / "bench"
    d.mkdir()
    (d / "fake_bench.py").write_text(FAKE)
    return d


def test_record_writes_header_then_the_json_object_lines(bench_dir, tmp_path, capsys):
    path = record.record("fake_bench", ["--threads", "2"], tmp_path / "out", bench_dir)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    header, rows = lines[0], lines[1:]
    assert header["bench"] == "fake_bench" and header["threads"] == 2  # the flag wins
    assert header["command"] == ".venv/bin/python bench/fake_bench.py --threads 2"
    assert header["cpu"] and header["torch"] and header["date"] and header["wall_s"] >= 0
    # the JSON objects in order; the text line and the JSON list are not results
    assert rows == [
        {"bench": "fake", "threads": 3},
        {"case": "a", "impl": "x", "ms": 1.5, "args": ["--threads", "2"]},
    ]
    assert "not json" in capsys.readouterr().err


def test_thread_count_from_the_lines_when_no_flag(bench_dir, tmp_path):
    path = record.record("fake_bench", [], tmp_path, bench_dir)
    assert json.loads(path.read_text().splitlines()[0])["threads"] == 3


def test_a_failing_benchmark_keeps_the_previous_file(bench_dir, tmp_path):
    old = tmp_path / "fake_bench.jsonl"
    old.write_text('{"bench": "fake_bench", "old": true}\n')
    with pytest.raises(SystemExit, match="exited with 1; nothing written"):
        record.record("fake_bench", ["--fail"], tmp_path, bench_dir)
    assert old.read_text() == '{"bench": "fake_bench", "old": true}\n'
    assert not list(tmp_path.glob("*.tmp"))


def test_out_names_the_file_and_leaves_the_benchmarks_own_alone(bench_dir, tmp_path):
    own = tmp_path / "fake_bench.jsonl"
    own.write_text('{"bench": "fake_bench", "old": true}\n')
    path = record.record("fake_bench", [], tmp_path, bench_dir, out="fake_bench_other")
    assert path == tmp_path / "fake_bench_other.jsonl"
    assert json.loads(path.read_text().splitlines()[0])["bench"] == "fake_bench"
    assert own.read_text() == '{"bench": "fake_bench", "old": true}\n'
    with pytest.raises(SystemExit, match="--out takes a file name without a suffix"):
        record.record("fake_bench", [], tmp_path, bench_dir, out="../x.jsonl")


def test_unknown_benchmark_names_the_known_ones(bench_dir, tmp_path):
    with pytest.raises(SystemExit, match="no benchmark 'nope'; expected one of fake_bench"):
        record.record("nope", [], tmp_path, bench_dir)


def test_every_recorded_file_renders(tmp_path):
    """Each benchmark file in docs/results turns into markdown with its command and CPU."""
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    import results

    names = [p.stem for p in (ROOT / "docs" / "results").glob("*_bench.jsonl")]
    assert "train_bench" in names
    for name in names:
        text = results.bench_tables(name)
        assert f"**`{name}`**" in text and "CPU:" in text and "|---|" in text

"""mkdocs hook: tables generated at build time from the files in docs/results.

A page asks for a table with an HTML comment on a line of its own:

- ``<!-- results:bench NAME -->``: every case of ``docs/results/NAME.jsonl``, the lines of
  ``bench/NAME.py`` as ``bench/record.py`` keeps them (its first line is a header with
  ``bench``, ``command``, ``cpu``, ``torch``, ``threads``, ``date``), as tables of timings and
  ratios and a plot of the ratios (inline SVG, matplotlib), with the command, the CPU and the
  date.
- ``<!-- results:benches -->``: the above for every benchmark JSONL file in docs/results that
  no page shows with its own ``results:bench`` marker.
- ``<!-- results:timing NAME -->``: a run's ``timing.jsonl`` (one line per training session).
- ``<!-- results:config fxrl/algorithms/NAME.py -->``: the fields of that module's ``Config``
  dataclass (name, type, default and the comment on its line), read from the source;
  ``<!-- results:config fxrl/envs/NAME.py:CLASS -->`` does the same for another dataclass.
- ``<!-- results:runs -->``: one row per recorded run (``docs/results/*.md``): its title, its
  command and the date it was committed, linked to the run's page.

Nothing here imports fxrl or torch: the site builds from the files alone.
"""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
MARKER = re.compile(r"^<!-- results:(\w+)(?: ([\w./:-]+))? -->$", re.M)
# Keys of a benchmark line that are not the setting it measured.
MEASURES = {"bench", "case", "check", "impl", "ratio", "value", "min", "max", "ms", "ms_min"}
MEASURES |= {"ms_max", "first_call_s", "wall_s"}
FLAGS = {"threads": "--threads", "repeats": "--repeats", "iters": "--iters"}


def _date(path: Path) -> str:
    """The date of the last commit that touched ``path`` (YYYY-MM-DD), if git knows it."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%cs", "--", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return out or "not committed yet"


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if value is None:
        return ""
    if isinstance(value, list):  # a spread: [min, max]
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value).replace("|", "\\|")


def _table(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def _columns(rows: list[dict], first: list[str]) -> list[str]:
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys and k not in ("bench", "case", "check")]
    if len(rows) == 1:  # nothing varies in one row: show all of it
        return [k for k in first if k in keys] + [k for k in keys if k not in first]
    varying = [k for k in keys if len({json.dumps(r.get(k)) for r in rows}) > 1 or k in first]
    return [k for k in first if k in varying] + [k for k in varying if k not in first]


def _group(row: dict, header: dict) -> str:
    """Which table a benchmark line goes in: its ``case``; else its own ``bench`` name when it
    differs from the file's; else the names of its keys (lines of one shape share a table)."""
    if "case" in row:
        return str(row["case"])
    if row.get("bench") not in (None, header.get("bench")):
        return str(row["bench"])
    return "\0" + ",".join(k for k in row if k not in MEASURES)  # unnamed: not shown


def bench_tables(name: str) -> str:
    """Markdown for one benchmark's JSONL file: header facts, then each case's tables."""
    path = RESULTS / f"{name}.jsonl"
    lines = _read_jsonl(path)
    header = lines[0] if "case" not in lines[0] else {}
    rows = lines[1:] if header else lines
    flags = " ".join(
        f"{flag} {header[key]}" for key, flag in FLAGS.items() if header.get(key) is not None
    )
    command = header.get("command") or (
        f".venv/bin/python bench/{header.get('bench', name)}.py {flags}".rstrip()
    )
    took = f", {header['wall_s']:.0f} s in all" if isinstance(header.get("wall_s"), float) else ""
    out = [
        f"**`{name}`**: `{command}`; CPU: {header.get('cpu', 'not recorded')},"
        f" torch {header.get('torch', '?')}, {header.get('threads', '?')} thread(s);"
        f" recorded {header.get('date') or _date(path)}{took}"
        f" ([raw JSONL](../results/{name}.jsonl)).",
        "",
    ]
    ratios_all = [r for r in rows if "ratio" in r and isinstance(r.get("value"), (int, float))]
    if ratios_all:
        out += [f'<div class="bench-plot">{ratio_plot(name, ratios_all)}</div>', ""]
    cases: dict[str, list[dict]] = {}
    for row in rows:
        cases.setdefault(_group(row, header), []).append(row)
    for case, group in cases.items():
        if not case.startswith("\0"):
            walls = "".join(f", {r['wall_s']} s wall" for r in group if "wall_s" in r)
            out += [f"*{case}*{walls}", ""]
        timed = [r for r in group if "impl" in r]
        ratios = [r for r in group if "ratio" in r and "impl" not in r]
        other = [r for r in group if r not in timed and r not in ratios]
        if timed:
            out += [_table(timed, _columns(timed, ["impl", "ms", "ms_min", "ms_max"])), ""]
        if ratios:
            out += [_table(ratios, _columns(ratios, ["ratio", "value", "min", "max"])), ""]
        if other and _columns(other, []):
            out += [_table(other, _columns(other, [])), ""]
    return "\n".join(out)


def ratio_plot(name: str, rows: list[dict]) -> str:
    """An inline SVG of a benchmark's ratio rows: median with the min-max range, a line at 1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def label(row: dict) -> str:  # the ratio and the settings that vary within its case
        case = [r for r in rows if r.get("case") == row.get("case")]
        keys = [k for k in row if k not in MEASURES]
        varying = [k for k in keys if len({json.dumps(r.get(k)) for r in case}) > 1]
        return row["ratio"] + "".join(f", {k}={row[k]}" for k in varying)

    labels = [label(r) for r in rows]
    values = [r["value"] for r in rows]
    low = [r["value"] - r.get("min", r["value"]) for r in rows]
    high = [r.get("max", r["value"]) - r["value"] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.2))
    ax.barh(range(len(rows)), values, xerr=[low, high], color="#5c6bc0", capsize=3)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ratio a/b, median and min-max (times or rates: the table names which)")
    ax.set_title(name, fontsize=9)
    fig.subplots_adjust(left=0.45, right=0.97, top=0.92, bottom=0.5 / (0.35 * len(rows) + 1.2))
    out = io.StringIO()
    fig.savefig(out, format="svg")
    plt.close(fig)
    svg = out.getvalue()
    return svg[svg.index("<svg") :].replace("\n", " ")


def all_benches() -> str:
    """Every benchmark JSONL file in docs/results that no page shows with its own marker."""
    shown = set()
    for page in (ROOT / "docs").rglob("*.md"):
        shown |= set(re.findall(r"^<!-- results:bench ([\w.-]+) -->$", page.read_text(), re.M))
    names = [
        p.stem
        for p in sorted(RESULTS.glob("*.jsonl"))
        if p.stem not in shown and "bench" in (_read_jsonl(p)[:1] or [{}])[0]
    ]
    return "\n\n".join(bench_tables(n) for n in names) or "Every benchmark file is on a page above."


def timing_table(name: str) -> str:
    path = RESULTS / f"{name}.jsonl"
    rows = _read_jsonl(path)
    return (
        _table(rows, list(rows[0]))
        + f"\n\nFrom [`{name}.jsonl`](../results/{name}.jsonl), recorded {_date(path)}."
    )


def runs_table() -> str:
    rows = []
    for page in sorted(RESULTS.glob("*.md")):
        text = page.read_text()
        title = next((ln[2:].strip() for ln in text.splitlines() if ln.startswith("# ")), page.stem)
        command = re.search(r"^ {4}(\S*python\S* .*)$", text, re.M)
        rows.append(
            {
                "run": f"[{title}](../results/{page.name})",
                "command": f"`{command.group(1).strip()}`" if command else "on the page",
                "recorded": _date(page),
            }
        )
    return _table(rows, ["run", "command", "recorded"])


def config_table(module: str, name: str = "Config") -> str:
    """A dataclass of a source file (``Config``, an env's params) as a table of its fields,
    read with ``ast`` (no import)."""
    source = (ROOT / module).read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    config = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    rows = []
    for stmt in config.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            line = lines[stmt.end_lineno - 1]
            rows.append(
                {
                    "field": f"`{stmt.target.id}`",
                    "type": f"`{ast.unparse(stmt.annotation)}`",
                    "default": f"`{ast.unparse(stmt.value)}`" if stmt.value else "required",
                    "meaning": line.split("  # ", 1)[1].strip() if "  # " in line else "",
                }
            )
    columns = ["field", "type", "default", "meaning"]
    if all(r["type"] == "`Any`" for r in rows):  # env params: any number or tensor
        columns.remove("type")
    return _table(rows, columns) + f"\n\nRead from `{module}` when the site was built."


def render(kind: str, name: str | None) -> str:
    if kind == "bench" and name:
        return bench_tables(name)
    if kind == "benches":
        return all_benches()
    if kind == "timing" and name:
        return timing_table(name)
    if kind == "config" and name:
        return config_table(*name.split(":"))
    if kind == "runs":
        return runs_table()
    raise ValueError(f"results hook: unknown marker results:{kind} {name or ''}")


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace each ``<!-- results:... -->`` marker by its generated table."""
    return MARKER.sub(lambda m: render(m.group(1), m.group(2)), markdown)

"""Figures on a page are checked against the files in docs/results.

A measured figure written in a page's prose (a time, a ratio, a percentage, a return)
is followed, after its paragraph, list or table, by an HTML comment that says where it
comes from; rendered pages (the site, GitHub's README) do not show it:

    The 8 seeds run at **17.8x SB3's env steps/s** (125.9 k against 7.1 k).

    <!-- figures: train_bench.jsonl
    17.8x = row(ratio="fxrl_8seeds/sb3")["value"]
    125.9 k = row(ratio="fxrl_8seeds/sb3")["fxrl_steps_per_s"]
    7.1 k = row(ratio="fxrl_8seeds/sb3")["sb3_steps_per_s"]
    -->

Each line ``TEXT = EXPRESSION`` says: ``TEXT`` is written in the text since the previous
``figures`` comment (the comment's *region*), and the numbers in it are the expression's
value rounded as written (``17.8x`` is any value in [17.75, 17.85]; ``125.9 k`` is read as
125,900 and ``4.3e-08`` as 4.3e-08, each to half its last digit, and ``about 410x`` to
half of ten; a range ``2.4-2.5x`` or
``8 of 8`` needs a pair; ``a | b | c`` are cells of one table row, in order). The
expression is Python over the comment's files (named after ``figures:``, paths under
docs/results):

- ``row(**match)``: the one record whose keys equal ``match`` (``row("other.jsonl",
  **match)`` searches another file of the comment; ``seed=...`` matches any record with
  a ``seed``); ``rows(...)``: all such records;
- ``data()`` / ``data("other.json")``: a whole file (a JSON value; a JSONL file is the
  list of its lines);
- ``mean``, ``median``, ``values`` (a dict's values as a list) and Python's ``min``,
  ``max``, ``sum``, ``len``, ``abs``, ``round``, ``sorted``, ``all``, ``any``, ``list``,
  ``zip``, ``enumerate``, ``range``, ``float``, ``int``, ``str``.

A line ``let NAME = EXPRESSION`` names a value for the lines below it. A line
``TEXT: why`` says that a number in the region is not a measurement (a setting, a
goal, a size) and names what it is. Every number of the region that looks measured (a
decimal, a ratio ``1.7x``, a percentage, a time ``33 s`` or ``9.4 ms``, ``125.9 k``,
``N of M``) must sit inside one of the comment's TEXTs, and every TEXT must be in the
region: changing a figure on a page, or adding one without saying where it comes from,
makes ``problems`` report it. tests/test_docs_figures.py runs that on every page and the
README; as an mkdocs hook, the site's strict build fails on it too (and the built pages
leave the comments out).

Nothing here imports fxrl or torch: the checks read the files alone.
"""

from __future__ import annotations

import json
import logging
import math
import re
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
BLOCK = re.compile(r"<!-- figures(?::[ \t]*(?P<files>[^\n]*))?\n(?P<body>.*?)-->", re.S)
NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>-?)(?P<digits>\d[\d,]*(?:\.\d+)?)(?:[eE](?P<exp>[-+]?\d+))?"
    r"(?P<k>\s?[kM](?![A-Za-z]))?"
)
_NUM = r"\d[\d,]*(?:\.\d+)?"
# What looks measured in prose. A setting that matches ("lr 2.5e-4" does not; "gamma 0.99"
# does) is named in the figures comment as not a measurement.
MEASURED = re.compile(
    "|".join(
        [
            rf"(?<![\w.]){_NUM}x(?!\w)",  # a ratio: 1.7x (not 2x256)
            rf"(?<![\w.]){_NUM}\s?%",  # a percentage
            rf"(?<![\w.]){_NUM}\s?(?:s|ms|µs|us|ns|min|minutes|hours)(?![\w/])",  # a time
            rf"(?<![\w.]){_NUM}\s?k(?![A-Za-z])",  # thousands: 125.9 k, 49k
            r"(?<![\w.])\d+\.\d+(?![\w.]|\.\d)",  # a decimal (not a version 2.13.0)
            r"(?<![\w.])\d+ of \d+(?![\w.])",  # a count: 8 of 8
        ]
    )
)
# A version is not a figure: "torch 2.13", "Python 3.10", "Python >= 3.10".
VERSION = re.compile(
    r"(?:torch|Python|python|JAX|jax|jaxlib|gymnax|gymnasium|numpy|Runtime|onnxruntime|"
    r"ale-py|ale_py|Ray|ray|mkdocs|CUDA|opset|SB3|version|v)\s*(?:[<>=]=?\s*)?$"
)
log = logging.getLogger("mkdocs.hooks.figures")


@dataclass
class Line:
    text: str
    expression: str | None  # None: a stated non-measurement
    lineno: int
    let: bool = False  # "let NAME = EXPRESSION": a name for the lines below


@dataclass
class Block:
    files: list[str]
    lines: list[Line]
    start: int  # offset of "<!--" in the page
    end: int  # offset after "-->"
    lineno: int


def blocks(page: str) -> list[Block]:
    """The ``figures`` comments of a page, in order (not those shown in code blocks)."""
    out, code = [], _mask_code(page)
    for match in BLOCK.finditer(page):
        if code[match.start()] != "<":
            continue
        first = page.count("\n", 0, match.start()) + 1
        lines = []
        for i, raw in enumerate(match["body"].split("\n")):
            raw = raw.strip()
            if not raw:
                continue
            if raw.startswith("let ") and " = " in raw:
                name, expression = raw[4:].split(" = ", 1)
                lines.append(Line(name.strip(), expression.strip(), first + 1 + i, let=True))
            elif " = " in raw:
                text, expression = raw.split(" = ", 1)
                lines.append(Line(text.strip(), expression.strip(), first + 1 + i))
            elif ": " in raw:
                lines.append(Line(raw.split(": ", 1)[0].strip(), None, first + 1 + i))
            else:
                lines.append(Line(raw, "", first + 1 + i))  # reported as malformed
        files = [f.strip() for f in (match["files"] or "").split(",") if f.strip()]
        out.append(Block(files, lines, match.start(), match.end(), first))
    return out


def written_numbers(text: str) -> list[tuple[float, float]]:
    """The numbers in a figure as written, each with its rounding: ``"125.9 k"`` ->
    ``[(125900.0, 50.0)]``; ``"2.4-2.5x"`` -> ``[(2.4, 0.05), (2.5, 0.05)]``."""
    out, previous_bare = [], False
    for m in NUMBER.finditer(text):
        digits = m["digits"].replace(",", "")
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        if text.startswith("about ") and not decimals:  # "about 410x": 2 significant digits
            decimals = -(len(digits) - len(digits.rstrip("0")))
        scale = {"k": 1e3, "M": 1e6}.get((m["k"] or "").strip(), 1.0)
        scale *= 10.0 ** int(m["exp"] or 0)  # 4.3e-08
        value = float(digits) * scale * (-1 if m["sign"] else 1)
        bare = not m["k"]
        if m["k"] and out and previous_bare and text[m.start() - 1 : m.start()] == "-":
            out[-1] = (out[-1][0] * scale, out[-1][1] * scale)  # 121-127 k
        out.append((value, 0.5 * 10.0**-decimals * scale))
        previous_bare = bare
    return out


def _blank(m: re.Match) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def _mask(page: str) -> str:
    """The page with what is not prose blanked out (same length, so offsets hold): code
    blocks and spans, HTML comments and tags, link targets."""
    text = re.sub(r"<!--.*?-->", _blank, _mask_code(page), flags=re.S)
    text = re.sub(r"(`+)(?:(?!\n\s*\n).)+?\1", _blank, text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", _blank, text)
    return re.sub(r"<[a-zA-Z/][^>]*>", _blank, text)


def _mask_code(page: str) -> str:
    """The page with its fenced and indented code blocks blanked out."""
    lines, fence, code = page.split("\n"), None, False
    for i, line in enumerate(lines):
        opening = re.match(r"\s*(`{3,}|~{3,})", line)
        blank_before = i == 0 or not lines[i - 1].strip()
        if fence is None and opening:
            fence = opening[1]
        elif fence is not None:
            fence = None if line.strip().startswith(fence) else fence
        elif line.startswith("    ") and (blank_before or code):
            code = True  # an indented code block
        else:
            code = False
            continue
        lines[i] = " " * len(line)
    return "\n".join(lines)


def _spans(text: str, region: str, offset: int) -> list[tuple[int, int]]:
    """Where ``text`` is written in ``region``: its pieces (split at `` | ``, the cells of a
    table row, in order on one line), as spans of the page."""
    pieces = [
        r"(?<![\w.])(" + r"\s+".join(map(re.escape, piece.split())) + r")(?!\d|\.\d)"
        for piece in text.split(" | ")
    ]
    return [
        (m.start(g) + offset, m.end(g) + offset)
        for m in re.finditer(r"[^\n]*?".join(pieces), region)
        for g in range(1, len(pieces) + 1)
    ]


def _load(name: str) -> Any:
    return _read(RESULTS / name)


@lru_cache(maxsize=256)
def _read(path: Path) -> Any:
    if path.suffix == ".jsonl":
        return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    return json.loads(path.read_text())


def _namespace(files: list[str]) -> dict[str, Any]:
    def pick(args: tuple, match: dict) -> list[dict]:
        name = args[0] if args else files[0]
        records = _load(name)
        records = records if isinstance(records, list) else [records]
        return [r for r in records if isinstance(r, dict) and all(
            k in r and (v is ... or r[k] == v) for k, v in match.items())]  # fmt: skip

    def row(*args: str, **match: Any) -> dict:
        found = pick(args, match)
        if len(found) != 1:
            raise LookupError(f"{len(found)} records match {match}, not 1")
        return found[0]

    return {
        "__builtins__": {},
        "row": row,
        "rows": lambda *args, **match: pick(args, match),
        "data": lambda name=None: _load(name or files[0]),
        "mean": statistics.fmean,
        "median": statistics.median,
        "values": lambda d: list(d.values()),
        **{f.__name__: f for f in (min, max, sum, len, abs, round, sorted, all, any, list)},
        **{f.__name__: f for f in (enumerate, range, float, int, str)},
        **{"zip": zip, "math": math},
    }


def _close(value: Any, written: list[tuple[float, float]]) -> bool:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(values) != len(written):
        return False
    return all(
        isinstance(v, (int, float)) and abs(v - w) <= tol * (1 + 1e-9) + 1e-12
        for v, (w, tol) in zip(values, written, strict=True)
    )


def _check(line: Line, namespace: dict[str, Any], files: list[str]) -> str | None:
    """Run one line of a comment: bind a ``let``, or compare a figure with its value."""
    if line.expression is None:
        return None
    if not line.expression:
        return f"expected 'TEXT = EXPRESSION' or 'TEXT: why': {line.text!r}"
    written = written_numbers(line.text)
    if not line.let and not written:
        return f"{line.text!r} has no number"
    try:
        value = eval(line.expression, namespace)
        if line.let:
            names = [n.strip() for n in line.text.split(",")]
            namespace.update(zip(names, [value] if len(names) == 1 else value, strict=True))
            return None
    except Exception as error:  # the message names the line, whatever went wrong
        return f"{line.expression} failed: {type(error).__name__}: {error}"
    if not _close(value, written):
        return f"the page says {line.text!r}, {files} give {value!r}"
    return None


def problems(page: str, name: str) -> list[str]:
    """What is wrong with a page's figures: a figure not where its comment says, a value
    that is not its file's, a measured-looking number no comment names. Each problem is one
    line that starts with ``name:line``."""
    out: list[str] = []
    masked = _mask(page)
    covered: list[tuple[int, int]] = []
    previous = 0
    for block in blocks(page):
        region = masked[previous : block.start]
        missing = [f for f in block.files if not (RESULTS / f).is_file()]
        if missing:
            out.append(f"{name}:{block.lineno}: no file docs/results/{missing[0]}")
        namespace = _namespace(block.files)
        for line in block.lines if not missing else []:
            if not line.let:
                spans = _spans(line.text, region, previous)
                if not spans:
                    out.append(f"{name}:{line.lineno}: {line.text!r} is not in the text above")
                covered += spans
            problem = _check(line, namespace, block.files)
            if problem:
                out.append(f"{name}:{line.lineno}: {problem}")
        previous = block.end
    for m in MEASURED.finditer(masked):
        if VERSION.search(masked[max(0, m.start() - 12) : m.start()]):
            continue
        if not any(a <= m.start() and m.end() <= b for a, b in covered):
            lineno = page.count("\n", 0, m.start()) + 1
            said = f"{m.group(0)!r} has no figures comment saying where it comes from"
            out.append(f"{name}:{lineno}: {said}")
    return out


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Warn (so ``--strict`` fails) about each figure the results do not back; the built
    page leaves the comments out."""
    for problem in problems(markdown, f"docs/{page.file.src_uri}"):
        log.warning(problem)
    for block in reversed(blocks(markdown)):
        markdown = markdown[: block.start] + markdown[block.end :]
    return markdown

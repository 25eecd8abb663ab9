"""mkdocs hook: the live CartPole page (``demo/cartpole/index.html`` in the built site).

``docs/demo/cartpole/`` holds what ``fxrl export RUN --format web`` wrote for a trained
CartPole policy, less the files that are the same for every site: the policy and the env
as ONNX models and ``site.json`` (tens of KB, committed; the guide's "Live page" section
has the commands that made them). This hook adds the rest to the site at build time: the
page and its script from ``fxrl/web/static`` (so the live page is the current one) and
onnxruntime-web's JavaScript and wasm from ``node_modules`` (14 MB, installed by
``make web-deps``, never committed). Without onnxruntime-web the build stops and says so.

Nothing here imports fxrl or torch: the site builds from the files alone.
"""

from __future__ import annotations

import os
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
DEMO = "demo/cartpole"
STATIC = ROOT / "fxrl" / "web" / "static"
# The same three files fxrl.web.site.ORT_FILES names (tests/test_web_demo.py checks it).
ORT_FILES = ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
ORT_ENV_VAR = "FXRL_ONNXRUNTIME_WEB"


def onnxruntime_web() -> Path:
    """onnxruntime-web's ``dist`` folder: ``$FXRL_ONNXRUNTIME_WEB`` or the checkout's."""
    candidates = [Path(os.environ[ORT_ENV_VAR])] if os.environ.get(ORT_ENV_VAR) else []
    candidates.append(ROOT / "node_modules" / "onnxruntime-web" / "dist")
    for c in candidates:
        if all((c / f).is_file() for f in ORT_FILES):
            return c
    raise PluginError(
        f"web_demo hook: onnxruntime-web not found in {', '.join(map(str, candidates))}; "
        f"the live CartPole page needs its files: run `make web-deps` (npm), or set "
        f"{ORT_ENV_VAR} to its dist folder."
    )


def on_files(files: Files, config) -> Files:
    if files.get_file_from_path(f"{DEMO}/site.json") is None:
        raise PluginError(f"web_demo hook: docs/{DEMO}/site.json is missing.")
    ort = onnxruntime_web()
    extra = [p for p in sorted(STATIC.iterdir()) if p.is_file()] + [ort / f for f in ORT_FILES]
    for path in extra:
        uri = f"{DEMO}/{path.name}"
        if files.get_file_from_path(uri) is not None:
            raise PluginError(f"web_demo hook: docs/{uri} is committed; it is added at build.")
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files

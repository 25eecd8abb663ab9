"""Ship a trained policy to the web: a static site where the policy and the env run in
onnxruntime-web (``fxrl export RUN --format web --out SITE``; see ``fxrl.web.site``)."""

from fxrl.web.env_onnx import export_env
from fxrl.web.site import (
    WebExportError,
    export_site,
    find_onnxruntime_web,
    reference_episode,
    web_envs,
    write_site,
)

__all__ = [
    "WebExportError",
    "export_env",
    "export_site",
    "find_onnxruntime_web",
    "reference_episode",
    "web_envs",
    "write_site",
]

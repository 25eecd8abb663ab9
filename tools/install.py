"""Install packages into the venv this script runs in, with uv where it can and pip where not.

``make venv`` and ``make demo`` call this: ``python tools/install.py -c constraints.txt -e
".[dev]"``. pip takes about three minutes to install the dev extra on a 2-core machine, most
of it spent compiling every installed module to bytecode one file at a time; uv installs the
same versions and compiles the bytecode on both cores in under a minute.

uv does not read pip's configuration, and a machine's pip configuration decides where packages
come from (a local wheel directory, extra indexes, a constraints file, a certificate). The
settings that choose packages are read from ``pip config list`` and passed to uv, so both
tools resolve to the same versions. Where uv cannot be installed or fails, pip installs the
same arguments, as before.
"""

from __future__ import annotations

import itertools
import os
import shlex
import subprocess
import sys
from pathlib import Path

# pip's configuration sections, lowest precedence first: a later one overrides an earlier one
# key by key (pip's own order: the config files' "global" then "install", then PIP_* variables).
_SECTIONS = ("global", "install", ":env:")
# pip's settings that choose packages, and uv's flag for each (a list value repeats the flag).
_LIST_FLAGS = {"extra-index-url": "--extra-index-url", "find-links": "--find-links",
               "constraint": "--constraint", "trusted-host": "--allow-insecure-host"}  # fmt: skip


def pip_settings(listing: str) -> dict[str, str]:
    """The merged settings of ``pip config list``'s output: ``section.key='value'`` lines, a
    later section overriding an earlier one per key. Sections other than those pip's
    ``install`` command reads are ignored."""
    found: dict[str, dict[str, str]] = {s: {} for s in _SECTIONS}
    for line in listing.splitlines():
        name, sep, value = line.partition("=")
        section, dot, key = name.rpartition(".")
        if not (sep and dot) or section not in found:
            continue
        found[section][key] = " ".join(shlex.split(value))
    merged: dict[str, str] = {}
    for section in _SECTIONS:
        merged.update(found[section])
    return merged


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def uv_options(settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """uv's command-line options and environment variables for pip's settings.

    Each index pip reads is given to uv, and uv's ``unsafe-best-match`` strategy takes the best
    version across all of them, as pip does (uv's default takes the first index that has
    the package)."""
    args = ["--index-strategy", "unsafe-best-match"]
    env: dict[str, str] = {}
    if "index-url" in settings:
        args += ["--index-url", settings["index-url"]]
    if _truthy(settings.get("no-index", "")):
        args.append("--no-index")
    for key, flag in _LIST_FLAGS.items():
        for value in settings.get(key, "").split():
            args += [flag, value]
    if "cert" in settings:
        env["SSL_CERT_FILE"] = settings["cert"]
    if "proxy" in settings:
        env["HTTPS_PROXY"] = env["HTTP_PROXY"] = settings["proxy"]
    return args, env


def _uv_install(python: str, packages: list[str]) -> bool:
    """Install ``packages`` with uv; False where uv is missing or failed."""
    venv_bin = Path(python).parent
    uv = venv_bin / "uv"
    pip = [python, "-m", "pip"]
    if not uv.exists():
        # pip's output is shown only where it failed (it warns about every index without uv)
        got = subprocess.run([*pip, "install", "--quiet", *_constraints(packages), "uv"],
                             capture_output=True, text=True)  # fmt: skip
        if got.returncode != 0 or not uv.exists():
            print(got.stdout + got.stderr, file=sys.stderr)
            return False
    listing = subprocess.run([*pip, "config", "list"], capture_output=True, text=True)
    if listing.returncode != 0:
        return False
    args, env = uv_options(pip_settings(listing.stdout))
    command = [str(uv), "pip", "install", "--python", python, "--quiet", "--compile-bytecode",
               *args, *packages]  # fmt: skip
    return subprocess.run(command, env={**os.environ, **env}).returncode == 0


def _constraints(packages: list[str]) -> list[str]:
    """The ``-c FILE`` pairs of the arguments (uv's own version is pinned there too)."""
    out = []
    for flag, value in itertools.pairwise(packages):
        if flag in ("-c", "--constraint"):
            out += ["-c", value]
    return out


def main(argv: list[str]) -> int:
    python = sys.executable
    if os.environ.get("FXRL_INSTALL_WITH") != "pip" and _uv_install(python, argv):
        return 0
    if os.environ.get("FXRL_INSTALL_WITH") != "pip":
        print("tools/install.py: uv did not install; installing with pip instead", file=sys.stderr)
    return subprocess.run([python, "-m", "pip", "install", "--quiet", *argv]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

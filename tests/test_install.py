"""tools/install.py: pip's configuration read into uv's options, so that ``make venv`` with uv
installs from the same places as pip; and the command it runs is one uv accepts."""

from __future__ import annotations

import importlib.util
import itertools
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("fxrl_tools_install", ROOT / "tools/install.py")
install = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install)


def test_later_sections_override_earlier_ones_key_by_key():
    listing = "\n".join([
        ":env:.find-links='/from/env'",
        "global.find-links='/from/file'",
        "global.extra-index-url='file:///a/simple file:///b/simple'",
        "install.constraint='/etc/c.txt'",
        "global.constraint='/etc/ignored.txt'",
        "user.index-url='https://not-a-section-pip-install-reads'",
        "global.cert='/etc/ssl/ca.crt'",
        "this line is not a setting",
    ])  # fmt: skip
    assert install.pip_settings(listing) == {
        "find-links": "/from/env",
        "extra-index-url": "file:///a/simple file:///b/simple",
        "constraint": "/etc/c.txt",
        "cert": "/etc/ssl/ca.crt",
    }


def test_each_setting_that_chooses_packages_becomes_a_uv_option():
    args, env = install.uv_options({
        "index-url": "https://idx/simple", "extra-index-url": "file:///a file:///b",
        "find-links": "/w1\n/w2", "constraint": "/c.txt", "no-index": "true",
        "cert": "/ca.crt", "proxy": "http://p:3128", "default-timeout": "180",
    })  # fmt: skip
    pairs = list(itertools.pairwise(args))
    assert ("--index-strategy", "unsafe-best-match") in pairs
    assert ("--index-url", "https://idx/simple") in pairs
    assert "--no-index" in args
    assert [v for f, v in pairs if f == "--extra-index-url"] == ["file:///a", "file:///b"]
    assert [v for f, v in pairs if f == "--find-links"] == ["/w1", "/w2"]
    assert [v for f, v in pairs if f == "--constraint"] == ["/c.txt"]
    assert env == {"SSL_CERT_FILE": "/ca.crt", "HTTPS_PROXY": "http://p:3128",
                   "HTTP_PROXY": "http://p:3128"}  # fmt: skip
    assert "180" not in args  # a setting that chooses no package is not passed on
    assert install.uv_options({})[0] == ["--index-strategy", "unsafe-best-match"]


def test_uv_accepts_the_command_with_this_machines_pip_configuration():
    """A dry run of what ``make venv`` runs, for a package the venv already has: uv must
    accept every option read from this machine's pip configuration (no fallback to pip)."""
    if not (Path(sys.executable).parent / "uv").exists():
        pytest.skip("this venv was installed with pip alone (no uv in it)")
    out = subprocess.run(
        [sys.executable, ROOT / "tools/install.py", "--dry-run", "-c", ROOT / "constraints.txt",
         "hypothesis"], capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "installing with pip instead" not in out.stderr, out.stderr


def test_pip_installs_the_same_arguments_where_uv_did_not(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(install, "_uv_install", lambda python, packages: False)

    def run(cmd, **kw):
        ran.append(cmd)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(install.subprocess, "run", run)
    assert install.main(["-c", "constraints.txt", "-e", ".[dev]"]) == 0
    assert ran == [[sys.executable, "-m", "pip", "install", "--quiet", "-c", "constraints.txt",
                    "-e", ".[dev]"]]  # fmt: skip
    assert "installing with pip instead" in capsys.readouterr().err
    monkeypatch.setenv("FXRL_INSTALL_WITH", "pip")
    monkeypatch.setattr(install, "_uv_install", lambda python, packages: pytest.fail("uv used"))
    assert install.main(["x"]) == 0 and ran[-1][-1] == "x"

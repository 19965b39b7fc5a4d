"""`lofp eval` (and `lofp calibrate`) runs the Python that lofp was installed with: a venv's bin/lofp finds bin/python3
beside it (copied or symlinked there), $LOFP_PYTHON wins over both, and `python -m lofp eval`
is handled in Python without calling back into the command (so is `python -m lofp calibrate`)."""
import os
import shutil
import subprocess

import pytest


def _fake_venv(tmp_path, cli, link):
    b = tmp_path / "v" / "bin"
    b.mkdir(parents=True)
    # A stand-in interpreter that reports how it was called: no network, no pip.
    py = b / "python3"
    py.write_text("#!/bin/sh\necho \"FAKEPY $0 $*\"\n")
    py.chmod(0o755)
    exe = b / "lofp"
    if link:
        exe.symlink_to(cli)
    else:
        shutil.copy(cli, exe)
    return exe, py


@pytest.mark.parametrize("cmd", ["eval", "calibrate"])
@pytest.mark.parametrize("link", [False, True])
def test_venv_lofp_eval_finds_venv_python(tmp_path, cli, link, cmd):
    exe, py = _fake_venv(tmp_path, cli, link)
    env = {k: v for k, v in os.environ.items() if k != "LOFP_PYTHON"}
    r = subprocess.run([str(exe), cmd, "--help"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"FAKEPY {py} -m lofp {cmd} --help"


def test_lofp_python_env_wins(tmp_path, cli):
    exe, _ = _fake_venv(tmp_path, cli, False)
    other = tmp_path / "other"
    other.write_text("#!/bin/sh\necho \"OTHER $*\"\n")
    other.chmod(0o755)
    r = subprocess.run([str(exe), "eval", "x"], capture_output=True, text=True,
                       env={**os.environ, "LOFP_PYTHON": str(other)})
    assert r.stdout.strip() == "OTHER -m lofp eval x"


def test_python_m_lofp_eval_stays_in_python(monkeypatch):
    import lofp.__main__ as m

    import subprocess

    def boom(*a, **k):
        raise AssertionError("python -m lofp started a process")
    for name in ("call", "run", "Popen", "check_call", "check_output"):
        monkeypatch.setattr(subprocess, name, boom)
    monkeypatch.setattr(os, "execv", boom)
    with pytest.raises(SystemExit) as ei:
        m.main(["eval", "--help"])
    assert ei.value.code == 0
    with pytest.raises(SystemExit) as ei:
        m.main(["calibrate", "--help"])
    assert ei.value.code == 0
    assert m.main(["inspect", "model.safetensors"]) == 2  # the command's, refused, not forwarded

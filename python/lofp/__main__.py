"""python -m lofp COMMAND ...: `eval` runs lofp.eval's command line; every other command is the
lofp binary's (quantize, dequantize, inspect, layout, verify, attention, bench, demo)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig


def _binary() -> str | None:
    """The lofp command: $LOFP_CLI, the one installed beside this interpreter, or on PATH."""
    env = os.environ.get("LOFP_CLI")
    if env:
        return env
    for scheme in (None, "posix_user"):
        try:
            d = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        p = os.path.join(d, "lofp")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return shutil.which("lofp")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "eval":
        from .eval import cli  # provided by lofp.eval
        return int(cli.main(argv[1:]) or 0)
    exe = _binary()
    if exe is None:
        sys.stderr.write("lofp: the lofp command is not installed (pip install . puts it beside python)\n")
        return 127
    return subprocess.call([exe, *argv])


if __name__ == "__main__":
    sys.exit(main())

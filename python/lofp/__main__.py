"""python -m lofp eval ... runs lofp.eval's command line (the one `lofp eval` runs too);
python -m lofp calibrate ... runs lofp.calibrate's (the one `lofp calibrate` runs);
python -m lofp --version prints the package's version. The other commands are the `lofp`
command's (installed beside this interpreter): the package never runs the command, so the two
front ends cannot call each other in a loop."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "eval":
        from .eval import cli
        return int(cli.main(argv[1:]) or 0)
    if argv and argv[0] == "calibrate":
        from . import calibrate
        return int(calibrate.main(argv[1:]) or 0)
    if argv and argv[0] in ("--version", "version"):
        from . import __version__
        print(f"lofp {__version__}")
        return 0
    cmd = argv[0] if argv else "(none)"
    sys.stderr.write(f"python -m lofp: unknown command {cmd!r}: python -m lofp runs 'eval', "
                     "'calibrate' and '--version'; the other commands are the lofp command's (pip install . puts "
                     "it beside python)\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())

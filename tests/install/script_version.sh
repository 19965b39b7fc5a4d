#!/usr/bin/env bash
# The version agrees everywhere it is reported: the VERSION file (the one source), the generated
# header, `lofp --version`, and the Python package when it is importable.
# Usage: script_version.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 root=$2
want=$(tr -d '[:space:]' < "$root/VERSION")
fail() { echo "script_version: $*" >&2; exit 1; }

hdr=$(sed -n 's/^#define LOFP_VERSION_STRING "\(.*\)"$/\1/p' "$build/include/lofp/version.h")
[ "$hdr" = "$want" ] || fail "version.h says '$hdr', VERSION says '$want'"

if [ -x "$build/lofp" ]; then
  cli=$("$build/lofp" --version)
  case "$cli" in *"$want"*) ;; *) fail "lofp --version says '$cli', VERSION says '$want'" ;; esac
fi

# The Python package, if one is importable (the venv of make test, or the ambient python).
py=${LOFP_PYTHON:-}
[ -z "$py" ] && [ -x "$root/.venv/bin/python" ] && py=$root/.venv/bin/python
if [ -n "$py" ] && "$py" -c 'import lofp' 2>/dev/null; then
  pv=$("$py" -c 'import lofp; print(lofp.__version__)')
  [ "$pv" = "$want" ] || fail "python lofp.__version__ is '$pv', VERSION says '$want'"
fi
grep -q "^## \[Unreleased\]\|^## \[$want\]" "$root/CHANGELOG.md" || fail "CHANGELOG.md has no Unreleased or $want section"
echo "script_version: $want everywhere"

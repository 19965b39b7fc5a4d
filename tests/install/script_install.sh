#!/usr/bin/env bash
# cmake --install into a temporary prefix, then a small consumer (tests/install/consumer.c) built
# against the installed tree three ways -- find_package(lofp) with lofp::lofp (shared) and
# lofp::lofp_static, and pkg-config (shared, and --static) -- and run. Exit 77 (skipped) when
# pkg-config is missing (scripts/install-deps.sh installs it).
# Usage: script_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 root=$2
command -v pkg-config >/dev/null || { echo "script_install: pkg-config not found, skipped"; exit 77; }
[ -f "$build/liblofp.so" ] || { echo "script_install: no shared library in $build (LOFP_BUILD_SHARED=OFF), skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/pkgconfig | head -1); libdir=${libdir%/pkgconfig}

for f in include/lofp/lofp.h include/lofp/version.h; do
  [ -f "$prefix/$f" ] || { echo "script_install: $f not installed" >&2; exit 1; }
done
[ -x "$prefix/bin/lofp" ] || { echo "script_install: bin/lofp not installed" >&2; exit 1; }
soname=$(objdump -p "$libdir/liblofp.so" | awk '/SONAME/ {print $2}')
major=$(cut -d. -f1 "$root/VERSION")
[ "$soname" = "liblofp.so.$major" ] || { echo "script_install: SONAME '$soname'" >&2; exit 1; }

cc=${CC:-cc}
# pkg-config, shared and static. The .pc file carries the install prefix it was configured with,
# so point pkg-config at the temporary prefix through its sysroot-free override.
export PKG_CONFIG_PATH=$libdir/pkgconfig
pc() { pkg-config --define-variable=prefix="$prefix" "$@" lofp; }
"$cc" "$root/tests/install/consumer.c" $(pc --cflags) $(pc --libs) -Wl,-rpath,"$libdir" -o "$tmp/pc_shared"
"$tmp/pc_shared"
"$cc" "$root/tests/install/consumer.c" $(pc --cflags) "$libdir/liblofp.a" $(pc --static --libs | sed 's/-llofp//') -o "$tmp/pc_static"
"$tmp/pc_static"

# find_package, both targets.
mkdir -p "$tmp/proj"
cat > "$tmp/proj/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.20)
project(lofp_consumer C)
find_package(lofp $(cat "$root/VERSION") REQUIRED)
add_executable(c_shared $root/tests/install/consumer.c)
target_link_libraries(c_shared PRIVATE lofp::lofp)
add_executable(c_static $root/tests/install/consumer.c)
target_link_libraries(c_static PRIVATE lofp::lofp_static)
CM
cmake -S "$tmp/proj" -B "$tmp/proj/b" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" >/dev/null
cmake --build "$tmp/proj/b" >/dev/null
"$tmp/proj/b/c_shared"
"$tmp/proj/b/c_static"
if ldd "$tmp/proj/b/c_static" | grep -q liblofp; then echo "script_install: c_static links liblofp.so" >&2; exit 1; fi
echo "script_install: find_package and pkg-config consumers (shared and static) run"

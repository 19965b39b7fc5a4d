#!/usr/bin/env bash
# Installs what the build and tests need, from Debian packages, when something is missing.
# Quiet and quick when everything is already there.
set -euo pipefail
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v cc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
# --build-only: what a build alone needs (make gpu-build on a GPU machine, which may have no clang,
# no python3-venv and no network); the tests and the fuzzers need the rest.
if [ "${1:-}" != "--build-only" ]; then
  command -v clang >/dev/null || need+=(clang)
  # tests/install/script_install.sh builds a consumer through lofp.pc
  command -v pkg-config >/dev/null || need+=(pkg-config)
  command -v python3 >/dev/null || need+=(python3)
  python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
  # the Python extension (python/) is built when the interpreter's headers are there
  python3 -c 'import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' \
    >/dev/null 2>&1 || need+=(python3-dev)
fi
# --slurm: a one-node Slurm for tests/checkpoint/slow_slurm.sh (make test-slurm), and strace,
# which it uses to slow one array task down.
if [ "${1:-}" = "--slurm" ]; then
  for c in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge strace:strace; do
    command -v "${c%%:*}" >/dev/null || [ -x "/usr/sbin/${c%%:*}" ] || need+=("${c#*:}")
  done
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${need[@]}"
fi

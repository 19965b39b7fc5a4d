#!/bin/bash
# Device run 15 (round five, final): run12.sh's `gpu` mode (make gpu-build, gpu-test, gpu-bench on
# the tree) with time limits that fit the session's remaining device time.
T_BUILD=200 T_TEST=260 T_BENCH=230 T_BENCH_EACH=150 exec bash "$(dirname "$0")/run12.sh" "$@"

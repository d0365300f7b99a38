#!/bin/sh
# run-suite.sh: the GPU suite on a machine without cJSON or bats installed (the device image),
# with bin/ built elsewhere and .devdeps/ carried (see device-env.sh).
# Usage, from the repository root: tests/gpu/run-suite.sh [BATS-ARGS]...
set -eu
. tests/gpu/device-env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
KG_BIN_DIR="$PWD/bin" exec timeout "${KG_SUITE_TIMEOUT:-900}" bats "$@" tests/gpu

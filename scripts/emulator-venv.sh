#!/usr/bin/env bash
# Installs MiniStack, the AWS emulator the deployed-stack tests (tests/deployed) stand template.yaml up in,
# into its own virtualenv, .cache/ministack-venv, from tools/ministack/requirements.txt + constraints.txt
# (it pins its own boto3). Reinstalled only when those files or the interpreter change; quick otherwise.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BOOT_PYTHON=${EMULATOR_PYTHON:-python3.11}
VENV=$PWD/.cache/ministack-venv
# shellcheck source=scripts/pinned-venv.sh
source scripts/pinned-venv.sh
pinned_venv "$VENV" "$BOOT_PYTHON" tools/ministack ministack "emulator: installing MiniStack into .cache/ministack-venv"
echo "emulator: MiniStack $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("ministack"))') is ready"

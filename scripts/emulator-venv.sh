#!/usr/bin/env bash
# Installs MiniStack, the AWS emulator the deployed-stack tests (tests/deployed) stand template.yaml up in,
# into its own virtualenv, .cache/ministack-venv, from tools/ministack/requirements.txt + constraints.txt
# (it pins its own boto3). Reinstalled only when those files or the interpreter change; quick otherwise.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BOOT_PYTHON=${EMULATOR_PYTHON:-python3.11}
VENV=$PWD/.cache/ministack-venv
STAMP=$VENV/.installed
want=$( { cat tools/ministack/requirements.txt tools/ministack/constraints.txt; "$BOOT_PYTHON" -VV; } | sha256sum | cut -d' ' -f1)
if [[ ! -x $VENV/bin/ministack || ! -f $STAMP || "$(cat "$STAMP")" != "$want" ]]; then
    echo "emulator: installing MiniStack into .cache/ministack-venv"
    rm -rf "$VENV"
    "$BOOT_PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        -r tools/ministack/requirements.txt -c tools/ministack/constraints.txt
    echo "$want" >"$STAMP"
fi
echo "emulator: MiniStack $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("ministack"))') is ready"

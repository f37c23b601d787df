#!/usr/bin/env bash
# Checks the SAM deployment: cfn-lint on template.yaml, then `sam build` (in process, no Docker) into a
# temporary directory, then looks inside what was built. Exits non-zero on any failure.
#
# The tools (aws-sam-cli, cfn-lint, pip) live in their own virtualenv, .cache/sam-venv, installed from
# tools/sam/requirements.txt + tools/sam/constraints.txt and reinstalled only when those files change.
#
#   bash scripts/sam-check.sh          # KEEP_BUILD=1 keeps the build directory and prints its path
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
BOOT_PYTHON=${SAM_CHECK_PYTHON:-python3.11}
VENV=$ROOT/.cache/sam-venv
export SAM_CLI_TELEMETRY=0

started=$(date +%s)
step() { printf '== %s (%ss)\n' "$1" "$(($(date +%s) - started))"; }
fail() { printf 'sam-check: %s\n' "$1" >&2; exit 1; }

# (a) the tools, installed only when their pins (or the interpreter) changed
# shellcheck source=scripts/pinned-venv.sh
source scripts/pinned-venv.sh
pinned_venv "$VENV" "$BOOT_PYTHON" tools/sam sam "$(step "installing aws-sam-cli and cfn-lint into .cache/sam-venv")"

# (b) lint
step "cfn-lint $("$VENV/bin/cfn-lint" --version | cut -d' ' -f2) template.yaml"
"$VENV/bin/cfn-lint" template.yaml || fail "cfn-lint found problems in template.yaml"

# (c) build, in a directory of its own
build=$(mktemp -d "${TMPDIR:-/tmp}/ticklock-sam-build.XXXXXX")
if [[ ${KEEP_BUILD:-0} == 1 ]]; then
    trap 'echo "build kept in $build"' EXIT
else
    trap 'rm -rf "$build"' EXIT
fi
step "sam build ($("$VENV/bin/sam" --version | awk '{print $NF}'), no container)"
# The layer's Makefile installs with this interpreter: Python 3.11 with the pinned pip.
PYTHON=$VENV/bin/python "$VENV/bin/sam" build --template template.yaml --build-dir "$build" \
    --no-use-container --no-cached >"$build.log" 2>&1 || { cat "$build.log" >&2; rm -f "$build.log"; fail "sam build failed"; }
rm -f "$build.log"

# (d) what was built
step "checking the build"
layer=$build/CommonLayer/python
[[ -f $layer/ticklock/__init__.py ]] || fail "the layer has no python/ticklock/__init__.py"
for fn in TickFunction RunnerFunction ApiFunction; do
    [[ -f $build/$fn/app.py ]] || fail "$fn has no app.py"
done
"$VENV/bin/python" - "$ROOT" "$layer" <<'PY' || fail "the layer does not match the template or constraints.txt"
import io, re, sys, zipfile
from importlib.metadata import distributions
from pathlib import Path

from cfnlint.decode import cfn_yaml

root, layer = Path(sys.argv[1]), Path(sys.argv[2])
canon = lambda name: re.sub(r"[-_.]+", "-", name).lower()
errors = []

# every distribution in the layer is at the version constraints.txt pins; ticklock's plug-ins are findable:
# its own (builtin) and the product's (ticklock-parts), through the "ticklock.plugins" entry points
pins = dict(
    (canon(n), v) for n, v in
    (line.split("#")[0].strip().split("==") for line in (root / "constraints.txt").read_text().splitlines() if "==" in line)
)
dists = {canon(d.metadata["Name"]): d for d in distributions(path=[str(layer)])}
for name, dist in sorted(dists.items()):
    if name not in ("ticklock", "ticklock-parts") and pins.get(name) != dist.version:
        errors.append(f"{name} {dist.version} is not pinned in constraints.txt (pin: {pins.get(name)})")
for name, plugin in (("ticklock", "builtin"), ("ticklock-parts", "parts")):
    found = dists[name].entry_points.select(group="ticklock.plugins").names if name in dists else set()
    if plugin not in found:
        errors.append(f"no {name} dist-info with the {plugin!r} entry point of 'ticklock.plugins' in the layer")

# compiled extensions are for the functions' architecture
template = cfn_yaml.load(str(root / "template.yaml"))
archs = template["Globals"]["Function"]["Architectures"]
machine = {"arm64": 183, "x86_64": 62}[archs[0]]  # ELF e_machine: EM_AARCH64, EM_X86_64
for so in layer.rglob("*.so*"):
    head = so.read_bytes()[:20]
    if head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") != machine:
        errors.append(f"{so.relative_to(layer)} is not built for {archs[0]}")

# size: Lambda's limit is 250 MB unzipped, function and layers together
files = [p for p in layer.parent.rglob("*") if p.is_file()]
unzipped = sum(p.stat().st_size for p in files)
buffer = io.BytesIO()
with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
    for p in files:
        zf.write(p, p.relative_to(layer.parent))
print(f"layer: {len(dists)} distributions, {len(files)} files, {unzipped / 1e6:.1f} MB unzipped "
      f"({unzipped / 262_144_000:.0%} of the 250 MB limit), {buffer.tell() / 1e6:.1f} MB zipped; {archs[0]}")
if unzipped > 262_144_000:
    errors.append("the layer is over Lambda's 250 MB unzipped limit")
for error in errors:
    print("  " + error, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
step "sam-check passed"

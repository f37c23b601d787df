# Sourced by the scripts that keep a tool in a virtualenv of its own under .cache (sam-check.sh,
# emulator-venv.sh). pinned_venv VENV PYTHON TOOLDIR PROBE MESSAGE: (re)creates VENV with PYTHON and
# installs TOOLDIR/requirements.txt under TOOLDIR/constraints.txt, only when those files or the interpreter
# changed (a stamp inside VENV holds their hash) or VENV/bin/PROBE is missing; prints MESSAGE when it does.
pinned_venv() {
    local venv=$1 python=$2 tools=$3 probe=$4 message=$5 want
    want=$( { cat "$tools/requirements.txt" "$tools/constraints.txt"; "$python" -VV; } | sha256sum | cut -d' ' -f1)
    if [[ ! -x $venv/bin/$probe || ! -f $venv/.installed || "$(cat "$venv/.installed")" != "$want" ]]; then
        echo "$message"
        rm -rf "$venv"
        "$python" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
            -r "$tools/requirements.txt" -c "$tools/constraints.txt"
        echo "$want" >"$venv/.installed"
    fi
}

# Sourced by scripts/demo and scripts/test: make sure ./.venv exists and has overnight installed.
# Reinstalls only when pyproject.toml changed since the last install (a stamp file records it).

_overnight_python() {
    local candidate
    for candidate in python3.11 python3.12 python3.13 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "overnight needs Python 3.11 or newer (none found as python3.11 ... python3)" >&2
    return 1
}

ensure_venv() {
    if [ ! -x .venv/bin/python ]; then
        local python
        python="$(_overnight_python)"
        echo "creating .venv with $python" >&2
        "$python" -m venv .venv
    fi
    local stamp=.venv/.overnight-installed
    local want
    want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "installing overnight and its dependencies into .venv" >&2
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
        echo "$want" >"$stamp"
    fi
}

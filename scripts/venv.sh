# Sourced by scripts/demo and scripts/test: make sure ./.venv exists and has overnight installed
# (the demo: what it runs on; the tests: the dev tools too). Reinstalls only when pyproject.toml
# changed since the last install, or the tests need the dev tools (a stamp file records it).

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

# What `ensure_venv` installs: overnight and its runtime dependencies for the demo, the `[dev]`
# extra (test, lint, docs and browser tools) too for the test command.
overnight_requirement() { # overnight_requirement [dev]
    if [ "${1:-}" = dev ]; then echo '.[dev]'; else echo '.'; fi
}

ensure_venv() { # ensure_venv [dev]
    local extra="${1:-}"
    if [ ! -x .venv/bin/python ]; then
        local python
        python="$(_overnight_python)"
        echo "creating .venv with $python" >&2
        "$python" -m venv .venv
    fi
    # The stamp says what was installed from which pyproject.toml: "<sha256> dev|runtime" (a
    # bare sha256: dev, as every install was before). A venv with the dev tools serves the
    # demo as it is; one without them gets them for the tests.
    local stamp=.venv/.overnight-installed
    local sha had="" want
    sha="$(sha256sum pyproject.toml | cut -d' ' -f1)"
    want="$sha ${extra:-runtime}"
    [ -f "$stamp" ] && had="$(cat "$stamp")"
    if [ "$had" != "$sha dev" ] && [ "$had" != "$sha" ] && [ "$had" != "$want" ]; then
        echo "installing overnight${extra:+ and its dev tools} into .venv" >&2
        .venv/bin/python -m pip install --quiet --disable-pip-version-check \
            -e "$(overnight_requirement "$extra")"
        echo "$want" >"$stamp"
    fi
}

# Installs Debian packages with apt when it can (as root, or with sudo that asks no password).
apt_install() { # apt_install WHY PACKAGE...
    local why="$1" sudo=""
    shift
    command -v apt-get >/dev/null 2>&1 || return 1
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || return 1
        sudo="sudo -n"
    fi
    echo "installing $* ($why)" >&2
    $sudo apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

# Local sandboxes are isolated with bubblewrap (bwrap) and get a network of their own from
# slirp4netns: install what is missing.
ensure_bubblewrap() {
    local missing=()
    command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
    command -v slirp4netns >/dev/null 2>&1 || missing+=(slirp4netns)
    [ "${#missing[@]}" -eq 0 ] && return 0
    if ! apt_install "to isolate local sandboxes" "${missing[@]}"; then
        echo "warning: could not install ${missing[*]}: local runs refuse to start without" \
            "them unless the worker allows \"isolation\": \"none\"" >&2
    fi
}

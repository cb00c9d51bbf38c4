#!/usr/bin/env bash
# Installs NeMo Gym 0.7.0 (about 1.4 GB, 1-2 minutes) for the tests that start its own servers: once, in the
# cache outside the checkout, so that a second run (or CI on the same machine) does not install it again.
# NeMo Gym 0.7.0 asks for Python >= 3.13.14, which these machines lack; it runs on pyenv's 3.13.0.
# Prints the Python that has it. Without a Python 3.13 it says so and those tests skip, except with CI=true.
set -euo pipefail
version=0.7.0
cache=${REVERIFY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/reverify-assets}
venv=$cache/nemo-gym-$version
if [ ! -f "$venv/.installed" ]; then
  base=${NEMO_GYM_BASE_PYTHON:-}
  if [ -z "$base" ]; then
    for candidate in "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")/versions/3.13.0/bin/python3" \
                     "$(command -v python3.13 || true)"; do
      [ -n "$candidate" ] && [ -x "$candidate" ] && { base=$candidate; break; }
    done
  fi
  if [ -z "$base" ]; then
    echo "nemo_gym.sh: no Python 3.13 found (set NEMO_GYM_BASE_PYTHON): NeMo Gym's servers cannot be tested" >&2
    [ "${CI:-}" = "true" ] && exit 1
    exit 0
  fi
  echo "nemo_gym.sh: installing nemo-gym==$version into $venv with $base" >&2
  rm -rf "$venv"
  mkdir -p "$cache"
  "$base" -m venv "$venv"
  log=$cache/nemo-gym-$version.install.log
  if ! "$venv/bin/python" -m pip install --disable-pip-version-check --ignore-requires-python \
      "nemo-gym==$version" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "nemo_gym.sh: installing nemo-gym==$version failed; the whole log: $log" >&2
    exit 1
  fi
  touch "$venv/.installed"
fi
echo "$venv/bin/python"

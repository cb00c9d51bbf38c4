#!/usr/bin/env bash
# The whole test suite, slow end-to-end tests included, from a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
# NeMo Gym's own servers are started by their tests from this installation (see tests/support/nemo_gym.py).
if nemo_gym_python=$(scripts/nemo_gym.sh) && [ -n "$nemo_gym_python" ]; then
  export REVERIFY_NEMO_GYM_PYTHON=$nemo_gym_python
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/lint-imports --no-cache
exec .venv/bin/python -m pytest -m "slow or not slow" "$@"

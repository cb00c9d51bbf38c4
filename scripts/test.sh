#!/usr/bin/env bash
# The whole test suite, slow end-to-end tests included, from a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest -m "slow or not slow" "$@"

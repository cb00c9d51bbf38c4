"""Run by NeMo Gym's Python, never imported by reverify: NeMo Gym's own rollout health checks on rollout files.

    <nemo-gym python> rollout_health_runner.py < '{"paths": [...], "output_dir": ..., "workers": N|null,
                                                   "ignored": [...]}'

``nemo_gym.rollout_health.run_health_checks`` writes ``quality_summary.json`` and ``rollout_verdicts.jsonl`` into
``output_dir``, and the last line on stdout is the summary's ``run`` block as JSON (its ``tasks`` block, one entry
a task, stays in the file). A crash of NeMo Gym's code leaves its traceback on stderr and exit status 1; the
caller tells the other endings by their status.
"""

import json
import sys
from pathlib import Path

CANNOT_READ = 3  # a rollout file that is not there or cannot be read; stderr holds the one line why
NOT_AVAILABLE = 4  # a NeMo Gym older than 0.7.0, which has no rollout health checks


def main() -> int:
    request = json.loads(sys.stdin.read())
    try:
        from nemo_gym.rollout_health import run_health_checks
    except ImportError as exc:
        print(f"this NeMo Gym has no rollout health checks ({exc})", file=sys.stderr)
        return NOT_AVAILABLE
    try:
        result = run_health_checks(
            [Path(path) for path in request["paths"]],
            output_dir=Path(request["output_dir"]),
            workers=request["workers"],
            ignored_checks=request["ignored"],
        )
    except OSError as exc:  # FileNotFoundError for a path that is no file; PermissionError; an I/O error
        print(exc, file=sys.stderr)
        return CANNOT_READ
    print(json.dumps(result.summary["run"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

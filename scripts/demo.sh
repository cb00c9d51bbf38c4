#!/usr/bin/env bash
# Re-scores the bundled mcqa sample under two grading modes with the built-in server, and compares them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
out=results/demo
sample=samples/mcqa
for mode in strict_single_letter_boxed lenient_boxed; do
  echo "== reverify run, grading_mode=$mode"
  .venv/bin/reverify run --config configs/mcqa.yaml \
    --inputs "$sample/rollouts_materialized_inputs.jsonl" --rollouts "$sample/rollouts.jsonl" \
    --output "$out/$mode.jsonl" --overwrite "++mcqa.resources_servers.mcqa.grading_mode=$mode"
  echo
done
.venv/bin/python -m reverify_assets.cli.compare_metrics \
  "$out/strict_single_letter_boxed_aggregate_metrics.json" "$out/lenient_boxed_aggregate_metrics.json"
home=$(.venv/bin/python -c 'from reverify_assets.defs.instance import ensure_dagster_home; print(ensure_dagster_home())')
cat <<TXT

Both runs are Dagster materializations recorded in DAGSTER_HOME=$home
See them in the UI:  DAGSTER_HOME=$home .venv/bin/dagster dev -w workspace.yaml
then open http://127.0.0.1:3000 > Assets > reverify (reverified_rows, aggregate_metrics: history and metadata).
TXT

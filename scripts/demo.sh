#!/usr/bin/env bash
# The demo, on the bundled samples with the built-in servers and the default local Dagster instance:
#   scene 1: an LLM-judge run during a judge outage, then --judge-failed-only recovery to the clean result;
#   scene 2: the mcqa sample re-scored under two grading modes, and the paired comparison of the two.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
reverify=.venv/bin/reverify
out=results/demo

echo "### Scene 1: a judge outage, the rows it cost in the sidecar, and their recovery"
judge_log=$(mktemp)
$reverify judge-serve --port 0 > "$judge_log" 2>&1 &
judge_pid=$!
trap 'kill $judge_pid 2>/dev/null || true; rm -f "$judge_log"' EXIT
for _ in $(seq 100); do grep -q "listening on" "$judge_log" && break; sleep 0.1; done
judge_url=$(grep -o 'http://[0-9.:]*' "$judge_log" | head -1)
judge_block=judge.resources_servers.equivalence_judge
judge=("++$judge_block.judge_base_url=$judge_url" "++$judge_block.retry_base_wait_s=0.05" "++$judge_block.retry_max_wait_s=0.2")
control() { .venv/bin/python -c "import sys, urllib.request as u; u.urlopen(u.Request(sys.argv[1] + '/control', data=sys.argv[2].encode(), headers={'Content-Type': 'application/json'})).read()" "$judge_url" "$1"; }
qa=(--inputs samples/judge/rollouts_materialized_inputs.jsonl)

echo "== the judge answers HTTP 503 to 10% of its requests"
control '{"fail_status": 503, "fail_share": 0.1}'
$reverify run --config configs/judge.yaml "${qa[@]}" --rollouts samples/judge/rollouts.jsonl \
  --output "$out/judge/outage.jsonl" --overwrite "${judge[@]}"
echo
echo "== the judge is back: re-judge only the judge_failed rows of outage_failures.jsonl"
control '{"fail_share": 0}'
$reverify run --judge-failed-only --config configs/judge.yaml "${qa[@]}" --rollouts "$out/judge/outage.jsonl" \
  --output "$out/judge/recovered.jsonl" --overwrite "${judge[@]}"
echo
echo "== for comparison, a clean run with a healthy judge"
$reverify run --config configs/judge.yaml "${qa[@]}" --rollouts samples/judge/rollouts.jsonl \
  --output "$out/judge/clean.jsonl" --overwrite "${judge[@]}" > /dev/null
echo "== the recovered output against the clean run, row by row (no row may differ)"
$reverify compare "$out/judge/clean.jsonl" "$out/judge/recovered.jsonl" --output "$out/judge/clean_vs_recovered.json" \
  | sed -n '/^## Rewards/,/^## Key metrics/p' | sed '$d'

echo "### Scene 2: the same 300 mcqa rollouts, two grading modes, no model calls"
for mode in strict_single_letter_boxed lenient_boxed; do
  echo "== reverify run, grading_mode=$mode"
  $reverify run --config configs/mcqa.yaml \
    --inputs samples/mcqa/rollouts_materialized_inputs.jsonl --rollouts samples/mcqa/rollouts.jsonl \
    --output "$out/$mode.jsonl" --overwrite "++mcqa.resources_servers.mcqa.grading_mode=$mode"
  echo
done
echo "== strict against lenient: which rows flipped, and is the difference real?"
$reverify compare "$out/strict_single_letter_boxed.jsonl" "$out/lenient_boxed.jsonl" \
  --output "$out/strict_vs_lenient.json" --markdown "$out/strict_vs_lenient.md"

home=$(.venv/bin/python -c 'from reverify_assets.defs.instance import ensure_dagster_home; print(ensure_dagster_home())')
cat <<TXT

Every run above is a Dagster materialization recorded in DAGSTER_HOME=$home
See them in the UI:  .venv/bin/reverify ui      (or DAGSTER_HOME=$home .venv/bin/dagster dev -w workspace.yaml)
then open http://127.0.0.1:3000 > Assets: group "judge_recovery" (scene 1: merged_rollouts and its two parents,
its one_verifier_config check) and group "reverify" (scene 2: reverified_rows, aggregate_metrics).
TXT

"""One comparison asset per rescoring with two or more verifier variants: each variant against the first.

    <name>/<variant>/aggregate_metrics_<variant> (every variant) ─> <name>/comparison   (all in group <name>)

It compares the variants' merged outputs as ``reverify compare`` does and writes each pair's report and
flips under ``<output_dir>/comparison/``; its metadata shows the 2×2 tables, the headline figures (also as
numbers, so the UI plots them across materializations) and a histogram of the per-task reward change.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from reverify_assets.defs.checks import ONE_CONFIG
from reverify_assets.defs.dagster_internals import UnresolvedAssetJobDefinition
from reverify_assets.defs.failures import Refusal, step_failures
from reverify_assets.defs.handles import content_version
from reverify_assets.defs.rescoring_defs import RescoringDefs
from reverify_assets.errors import ReverifyError, StateError
from reverify_assets.rescoring.spec import COMPARISON_DIR


@dataclass(frozen=True)
class ComparisonDefs:
    label: str  # <name>__comparison: its op and job
    key: dg.AssetKey
    variants: list[RescoringDefs]  # the first is the baseline
    asset: dg.AssetsDefinition
    job: UnresolvedAssetJobDefinition

    @property
    def assets(self) -> list[dg.AssetsDefinition]:
        """Everything ``materialize`` needs to resolve the comparison's parents."""
        return [*(asset for variant in self.variants for asset in variant.assets), self.asset]


def build_comparison(variants: Sequence[RescoringDefs]) -> ComparisonDefs | None:
    """None for a rescoring with fewer than two variants: there is nothing to compare."""
    # Each variant's name and merged output (a rescoring without variants has one unnamed verifier).
    sides = [(variant.variant, variant.layout.merged) for variant in variants if variant.variant is not None]
    if len(sides) < 2 or len(sides) != len(variants):
        return None
    (baseline_name, baseline_output), others = sides[0], sides[1:]
    baseline, spec = variants[0], variants[0].spec
    label = f"{spec.name}__{COMPARISON_DIR}"
    key = dg.AssetKey([spec.name, COMPARISON_DIR])
    folder = spec.outputs / COMPARISON_DIR

    @dg.asset(
        key=key,
        group_name=spec.name,  # the variants' group: the rescoring is one picture in the lineage
        deps=[variant.aggregate_key for variant in variants],
        automation_condition=dg.AutomationCondition.eager(),  # after every variant's aggregate
        description=(
            f"{spec.description}\n\nEvery variant's merged output compared with the first variant's "
            f"({baseline_name}), row by row as `reverify compare` does: the 2×2 table, McNemar's p, Cohen's κ, "
            "the mean reward change with its task-resampled interval, and the per-task change."
        ),
    )
    @step_failures
    def comparison(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        # Imported here: the statistics and matplotlib take a second or two to import, and only this step uses them.
        from reverify_assets.compare.key_metrics import HookChoice
        from reverify_assets.compare.provenance import MixedConfigsError, describe_configs
        from reverify_assets.defs.comparison_metadata import comparison_metadata
        from reverify_assets.rescoring.variant_comparison import VariantPair, compare_pair

        hooks = HookChoice(baseline.setup.topology, f"the verifier of variant {baseline_name!r}")
        outcomes = []
        for name, output in others:
            pair = VariantPair(baseline_name, name, baseline_output, output)
            try:
                outcomes.append(compare_pair(pair, folder, hooks))
            except MixedConfigsError as exc:
                variant = pair.baseline if exc.role == "baseline" else pair.candidate
                raise Refusal(
                    StateError(
                        f"cannot compare {pair.baseline} with {pair.candidate}: the merged output of variant "
                        f"{variant!r} ({exc.path}) mixes rows of {len(exc.configs)} verifier configs: "
                        f"{describe_configs(exc.configs)}. A comparison needs one config per side: the "
                        f"`{ONE_CONFIG}` check of {spec.name}/{variant}/aggregate_metrics_{variant} counts the rows "
                        "of each; re-score the shards holding the others.",
                        path=exc.path,
                    ),
                    {"merged output": dg.MetadataValue.path(str(exc.path))},
                ) from None
            except ReverifyError as exc:
                raise exc.reworded(f"cannot compare {pair.baseline} with {pair.candidate}: {exc}") from None
        context.log.info("compared %s with %s", baseline_name, ", ".join(name for name, _ in others))
        return dg.MaterializeResult(
            metadata=comparison_metadata(outcomes),
            data_version=content_version(*(outcome.files.report for outcome in outcomes)),
        )

    return ComparisonDefs(
        label=label,
        key=key,
        variants=list(variants),
        asset=comparison,
        job=dg.define_asset_job(f"{label}_job", selection=[key]),
    )

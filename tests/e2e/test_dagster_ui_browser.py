"""The Dagster UI as a user drives it, in headless Chromium: after a verifier edit the shards show as needing
work, one backfill of the missing partitions re-scores exactly them, and the aggregate that follows is complete
and equal to the command line's; a `reverify run` is re-executed from its run's page. Screenshots of every step
land in the test's ``screenshots`` folder."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
import orjson
import pytest

from reverify_assets.defs.code_location import CODE_LOCATION, REPOSITORY
from reverify_assets.defs.rescoring_defs import RescoringDefs, build_rescoring
from reverify_assets.rescoring.spec import find_rescoring
from tests.support.browser import Page, browser_available, chromium
from tests.support.ci import service_missing
from tests.support.cli import run_args, run_reverify
from tests.support.dagster_ui import graphql, running_ui
from tests.support.instance import open_instance
from tests.support.process_tree import wait_until
from tests.support.project import LENIENT, STRICT, VARIANTS, Project, make_project

pytestmark = pytest.mark.slow

SHARDS = 3
# Three shard runs launched by the daemon, each its own process, then the aggregate its sensor launches.
BACKFILL_S = 1200.0


@pytest.fixture(autouse=True)
def browser() -> None:
    if not browser_available():
        service_missing("Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver) are missing")


def test_a_verifier_edit_shows_stale_shards_and_one_backfill_gives_the_cli_aggregate(tmp_path: Path) -> None:
    project, home = make_project(tmp_path, tasks=30), tmp_path / "home"
    first = run_reverify("backfill", project.name, home=home, cwd=project.root)
    assert first.returncode == 0 and f"aggregate: {SHARDS * 40} rows" in first.stdout, first.stdout + first.stderr
    original = rescoring_of(project)
    ad_hoc = tmp_path / "ad_hoc" / "reverified.jsonl"
    config = project.root / "configs" / "mcqa.yaml"
    # --overwrite: what its re-execution does again (without it, the re-execution refuses the output it made).
    flags = (LENIENT, "--overwrite")
    cli_run = run_reverify(
        *run_args(config, project.inputs, project.rollouts, ad_hoc, *flags), home=home, cwd=project.root
    )
    assert cli_run.returncode == 0, cli_run.stderr
    [cli_run_id] = re.findall(r"Dagster run: (\S+)", cli_run.stdout)
    ad_hoc_rows = ad_hoc.read_bytes()
    shard_page = f"/assets/{project.name}/reverified_shard?view=partitions"

    with running_ui(project.root, home, tmp_path / "ui.log") as url, chromium(url, tmp_path / "screenshots") as page:
        try:
            page.open(shard_page)
            page.wait_for(f"//*[contains(text(), 'Materialized ({SHARDS})')]", "every shard materialized")
            page.screenshot("before-the-edit")

            project.write_rescoring(override=STRICT)
            edited = rescoring_of(project)
            reload_definitions(page, project)
            # Shown once the reload is done: the page opened again until then.
            page.wait_for_on_reload(shard_page, f"//*[text()='{edited.setup.config_hash}']", "the new config's hash")
            page.wait_for(f"//*[contains(text(), 'Missing ({SHARDS})')]", "the shards stale")
            page.screenshot("stale-after-the-edit")
            status = run_reverify("status", project.name, home=home, cwd=project.root).stdout
            assert f"stale {SHARDS}" in status, status

            launch_backfill_of_missing(page)
            assert wait_until(lambda: aggregate_of(home, edited) is not None, BACKFILL_S, poll_s=2), (
                f"the aggregate of {edited.setup.config_hash} never followed the backfill (see {tmp_path / 'ui.log'})"
            )
            page.open(f"/assets/{project.name}/aggregate_metrics?view=events")
            page.wait_for("//*[contains(text(), 'metrics cover')]", "the aggregate's metadata")
            page.screenshot("aggregate-after-the-backfill")

            # The edit undone: the first config's shards are materialized again, nothing re-scored.
            project.write_rescoring()
            reload_definitions(page, project)
            page.wait_for_on_reload(
                shard_page, f"//*[text()='{original.setup.config_hash}']", "the first config's hash"
            )
            page.wait_for(f"//*[contains(text(), 'Materialized ({SHARDS})')]", "the shards current")
            page.screenshot("current-again-after-undoing-the-edit")

            # The CLI's run is a run of the code location's job: re-executed from its page, with its files and flags.
            page.open(f"/runs/{cli_run_id}")
            page.wait_for("//*[contains(., 'reverify_run')]", "the CLI run's job")
            page.click("//button[contains(., 'Re-execute all')]", "Re-execute all")
            assert wait_until(lambda: reexecution_of(home, cli_run_id) == "SUCCESS", BACKFILL_S, poll_s=2), (
                f"the re-execution of {cli_run_id} never succeeded: {reexecution_of(home, cli_run_id)}"
            )
            page.screenshot("cli-run-re-executed")
        except BaseException:
            page.screenshot("failure")
            raise

    aggregate = aggregate_of(home, edited)
    assert aggregate is not None and aggregate["complete"] and aggregate["metrics cover"] == "120 of 120 rollouts"
    with open_instance(home) as instance:
        backfill_runs = [run for run in instance.get_runs() if "dagster/backfill" in run.tags]
    assert sorted(run.tags["dagster/partition"] for run in backfill_runs) == [
        edited.partition_key(f"main.s{n:05d}") for n in range(SHARDS)
    ], "the backfill re-scored exactly the stale shards"

    assert ad_hoc.read_bytes() == ad_hoc_rows, "the re-execution wrote the run's output again, the same"

    # The command line on the same files and config: the same rows, bytes and metrics.
    unsharded = tmp_path / "unsharded.jsonl"
    cli = run_reverify(*run_args(config, project.inputs, project.rollouts, unsharded, STRICT), home=tmp_path / "cli")
    assert cli.returncode == 0, cli.stderr
    assert edited.layout.merged.read_bytes() == unsharded.read_bytes()
    ui_metrics = orjson.loads(edited.layout.merged_metrics.read_bytes())
    cli_metrics = orjson.loads(unsharded.with_name("unsharded_aggregate_metrics.json").read_bytes())
    assert [e["key_metrics"] for e in ui_metrics] == [e["key_metrics"] for e in cli_metrics]
    assert [e["coverage"] for e in ui_metrics] == [e["coverage"] for e in cli_metrics]
    assert "materialized 3, stale 0" in run_reverify("status", project.name, home=home, cwd=project.root).stdout


def rescoring_of(project: Project) -> RescoringDefs:
    return build_rescoring(find_rescoring(project.root, project.name))


def reload_definitions(page: Page, project: Project) -> None:
    page.open(f"/asset-groups/{project.name}")
    page.click("//button[contains(., 'Reload definitions')]", "the Reload definitions button")


def launch_backfill_of_missing(page: Page) -> None:
    """Materialize on the shard asset's page: every shard, every config, only the failed and missing ones."""
    page.click("//button[contains(., 'Materialize')]", "the Materialize button")
    # The three shard assets are one step: the UI says the other two come along.
    page.click("//button[normalize-space()='Confirm']", "the multi-asset notice")
    page.wait_for("//button[normalize-space()='Launch backfill']", "the backfill dialog")
    for dimension in range(2):
        page.click(f"(//button[normalize-space()='All'])[{dimension + 1}]", f"dimension {dimension}'s All")
    page.click("//label[contains(., 'Backfill only failed and missing')]", "the missing-only option")
    page.wait_for(f"//*[contains(., 'Only {SHARDS} failed and missing partitions')]", "the missing-only count")
    page.screenshot("backfill-of-the-missing-shards")
    launch = "//button[normalize-space()='Launch backfill']"
    page.click(launch, "Launch backfill")
    page.until(lambda: page.visible(launch) is None, "the dialog closed on the backfill's launch")


def reexecution_of(home: Path, parent: str) -> str | None:
    """The status of the latest run re-executing ``parent``."""
    with open_instance(home) as instance:
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/parent_run_id": parent}), limit=1)
    return runs[0].status.value if runs else None


def aggregate_of(home: Path, rescoring: RescoringDefs) -> dict[str, object] | None:
    """The metadata of the aggregate of ``rescoring``'s current config, once materialized."""
    with open_instance(home) as instance:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=rescoring.aggregate_key, asset_partitions=[rescoring.aggregate_partition]),
            limit=1,
        ).records
    if not records or records[0].asset_materialization is None:
        return None
    return {k: getattr(v, "value", v) for k, v in records[0].asset_materialization.metadata.items()}


def test_the_comparison_shows_its_flip_table_and_per_task_change_without_a_click(tmp_path: Path) -> None:
    project, home = make_project(tmp_path, tasks=10), tmp_path / "home"
    project.write_rescoring(extra=VARIANTS)
    done = run_reverify("backfill", project.name, home=home, cwd=project.root)
    assert done.returncode == 0, done.stdout + done.stderr
    with running_ui(project.root, home, tmp_path / "ui.log") as url, chromium(url, tmp_path / "screenshots") as page:
        try:
            page.open(f"/assets/{project.name}/comparison")
            # Rendered markdown: table cells, not the "[Show Markdown]" link to them.
            page.wait_for("//td[normalize-space()='0 (unchanged)']", "the per-task change's bar chart")
            page.wait_for("//td[normalize-space()='flip rate']", "the figures table")
            flips = page.wait_for("//th[normalize-space()='candidate pass']", "the 2×2 table")
            page.scroll_to(flips)
            page.screenshot("comparison-in-place")
        except BaseException:
            page.screenshot("failure")
            raise


def test_the_verifier_probe_is_materialized_from_the_ui_and_shows_its_verdict_and_check(tmp_path: Path) -> None:
    project, home = make_project(tmp_path, tasks=10), tmp_path / "home"
    rescoring = rescoring_of(project)
    kept = home / "reverify_probes" / f"{rescoring.setup.config_hash}.json"
    with running_ui(project.root, home, tmp_path / "ui.log") as url, chromium(url, tmp_path / "screenshots") as page:
        try:
            page.open(f"/assets/{project.name}/verifier_probe")
            page.click("//button[contains(., 'Materialize')]", "the Materialize button")
            page.wait_for("//button[normalize-space()='Launch backfill']", "the launch dialog")
            page.click("//button[normalize-space()='All']", "All: its one partition, the current verifier config")
            # One partition selected: the dialog launches one run instead of a backfill.
            page.screenshot("probe-launch-dialog")
            page.click("//button[normalize-space()='Launch 1 run']", "Launch 1 run")
            assert wait_until(kept.is_file, BACKFILL_S, poll_s=1), f"no probe report (see {tmp_path / 'ui.log'})"
            page.wait_for_on_reload(
                f"/assets/{project.name}/verifier_probe?view=events",
                "//*[contains(text(), 'CONSISTENT WITH STATELESS: two separately started servers agree on all 40')]",
                "the verdict in the materialization's metadata",
            )
            page.screenshot("probe-verdict")
            page.open(f"/assets/{project.name}/verifier_probe?view=checks")
            page.wait_for("//*[contains(text(), 'stateless_evidence')]", "the probe's check")
            page.screenshot("probe-check")
        except BaseException:
            page.screenshot("failure")
            raise
    report = orjson.loads(kept.read_bytes())
    assert report["between_passes"]["agree"] == report["between_passes"]["rows"] == report["sampled_rows"]


# Once a year, so that no tick of its own falls within the test: the Preview evaluates a tick of our choosing.
YEARLY = 'schedule: {cron: "0 3 1 1 *"}\n'
EVERY_MINUTE = 'schedule: {cron: "* * * * *"}\n'
TICKS = """
query Ticks($selector: ScheduleSelector!, $statuses: [InstigationTickStatus!]) {
  scheduleOrError(scheduleSelector: $selector) {
    ... on Schedule { scheduleState { ticks(limit: 100, statuses: $statuses) { status skipReason runIds } } }
  }
}"""


@pytest.mark.timeout(3 * BACKFILL_S)  # it waits for the daemon's ticks, a minute apart, and for its runs
def test_the_schedule_previews_a_quiet_night_and_an_edit_the_daemon_runs_it_and_failures_read_as_one_line(
    tmp_path: Path,
) -> None:
    """The rescore schedule's Preview: a skip with its reason on a quiet night, three run requests after a verifier
    edit; the daemon's own ticks then re-score the shards and skip once all is current. On the way: a check's
    results by partition, the aggregate's tables within a 1400 px page, and a refused re-execution that reads as
    our one sentence."""
    project, home = make_project(tmp_path, tasks=30), tmp_path / "home"
    project.write_rescoring(extra=YEARLY)
    first = run_reverify("backfill", project.name, home=home, cwd=project.root)
    assert first.returncode == 0 and f"aggregate: {SHARDS * 40} rows" in first.stdout, first.stdout + first.stderr
    original = rescoring_of(project)
    # Its re-execution is refused on purpose: the output exists, and the run has neither --overwrite nor --resume.
    config = project.root / "configs" / "mcqa.yaml"
    ad_hoc = tmp_path / "ad_hoc" / "reverified.jsonl"
    cli_run = run_reverify(*run_args(config, project.inputs, project.rollouts, ad_hoc), home=home, cwd=project.root)
    assert cli_run.returncode == 0, cli_run.stderr
    [cli_run_id] = re.findall(r"Dagster run: (\S+)", cli_run.stdout)
    schedule = f"{project.name}_rescore"

    with running_ui(project.root, home, tmp_path / "ui.log") as url, chromium(url, tmp_path / "screenshots") as page:
        try:
            page.driver.set_window_size(1400, 1000)
            preview_tick(page, schedule)
            page.wait_for(
                f"//*[contains(., 'Skip reason: \"all {SHARDS} shards current under config "
                f"{original.setup.config_hash}\"')]",
                "the quiet night's skip and its reason",
            )
            page.screenshot("schedule-preview-a-quiet-night")

            page.open(f"/assets/{project.name}/aggregate_metrics?view=checks")
            page.wait_for("//*[text()='one_verifier_config']", "the aggregate's check")
            page.click("(//*[normalize-space()='Partitions'])[last()]", "the check's Partitions tab")
            page.wait_for("//*[contains(text(), 'Passed (1)')]", "one passed result, by partition")
            page.wait_for(f"//*[text()='{original.setup.config_hash}']", "the config's partition")
            page.screenshot("check-results-by-partition")

            page.open(f"/assets/{project.name}/aggregate_metrics")
            page.wait_for("//*[contains(text(), 'metrics cover')]", "the aggregate's metadata")
            page.wait_for("//*[contains(@class, 'dagster-markdown')]//table", "the key metrics table")
            assert page.overflowing_tables() == [], "a table runs past the page at 1400 px"
            page.screenshot("aggregate-tables-at-1400-px")

            page.open(f"/runs/{cli_run_id}")
            page.click("//button[contains(., 'Re-execute all')]", "Re-execute all")
            assert wait_until(lambda: reexecution_of(home, cli_run_id) == "FAILURE", BACKFILL_S, poll_s=2), (
                f"the re-execution of {cli_run_id} was not refused: {reexecution_of(home, cli_run_id)}"
            )
            page.open(f"/runs/{reexecution_id(home, cli_run_id)}")
            page.wait_for("//*[text()='RUN_FAILURE']", "the run's failure")
            page.wait_for(f"//*[starts-with(normalize-space(), \"Output file already exists: '{ad_hoc}'\")]", "ours")
            shown = page.text()
            assert "Stack Trace" not in shown and "Error occurred while executing" not in shown, shown
            page.screenshot("a-refused-re-execution-in-one-line")

            project.write_rescoring(override=STRICT, extra=YEARLY)
            edited = rescoring_of(project)
            reload_definitions(page, project)
            page.wait_for_on_reload(
                f"/assets/{project.name}/reverified_shard?view=partitions",
                f"//*[text()='{edited.setup.config_hash}']",
                "the new config's hash",
            )
            preview_tick(page, schedule)
            page.wait_for(f"//*[normalize-space()='Requested runs ({SHARDS})']", "a run request per stale shard")
            page.screenshot("schedule-preview-after-an-edit")

            # The daemon's turn: a tick every minute.
            project.write_rescoring(override=STRICT, extra=EVERY_MINUTE)
            reload_definitions(page, project)
            quiet = f"all {SHARDS} shards current under config {edited.setup.config_hash}"
            assert wait_until(lambda: any(t["skipReason"] == quiet for t in ticks(url, schedule)), BACKFILL_S, 5), (
                f"the daemon never had a quiet tick under {edited.setup.config_hash}: {ticks(url, schedule)} "
                f"(see {tmp_path / 'ui.log'})"
            )
            launching_ticks, failed_ticks = ticks(url, schedule, "SUCCESS"), ticks(url, schedule, "FAILURE")
            page.open(f"/locations/{REPOSITORY}@{CODE_LOCATION}/schedules/{schedule}")
            page.wait_for(f"//*[normalize-space()='{SHARDS} runs requested']", "the daemon's tick that launched them")
            page.screenshot("schedule-ticks-of-the-daemon")
        except BaseException:
            page.screenshot("failure")
            raise

    [launching] = launching_ticks
    assert len(launching["runIds"]) == SHARDS
    with open_instance(home) as instance:
        runs = [instance.get_run_by_id(run_id) for run_id in launching["runIds"]]
    assert sorted(run.tags["dagster/partition"] for run in runs if run) == [
        edited.partition_key(f"main.s{n:05d}") for n in range(SHARDS)
    ], "the daemon's tick re-scored exactly the stale shards"
    assert all(run and run.status == dg.DagsterRunStatus.SUCCESS for run in runs)
    aggregate = aggregate_of(home, edited)
    assert aggregate is not None and aggregate["metrics cover"] == "120 of 120 rollouts", aggregate
    assert failed_ticks == [], failed_ticks


def preview_tick(page: Page, schedule: str) -> None:
    """The schedule page's *Preview tick result*, evaluated at the time the dialog offers."""
    page.open(f"/locations/{REPOSITORY}@{CODE_LOCATION}/schedules/{schedule}")
    page.click("//button[contains(., 'Preview tick result')]", "Preview tick result")
    page.click("//button[normalize-space()='Continue']", "Continue: evaluate the tick")


def ticks(url: str, schedule: str, *statuses: str) -> list[dict[str, object]]:
    """The schedule's ticks as the daemon recorded them (of ``statuses``, else all), the latest first."""
    selector = {"repositoryLocationName": CODE_LOCATION, "repositoryName": REPOSITORY, "scheduleName": schedule}
    answer = graphql(url, TICKS, {"selector": selector, "statuses": list(statuses) or None})
    return answer["data"]["scheduleOrError"]["scheduleState"]["ticks"]


def reexecution_id(home: Path, parent: str) -> str:
    with open_instance(home) as instance:
        [run] = instance.get_runs(dg.RunsFilter(tags={"dagster/parent_run_id": parent}), limit=1)
    return run.run_id

"""Protecting existing results: a fresh run refuses to touch them unless told to start over."""

from __future__ import annotations

from reverify_assets.errors import ReverifyError
from reverify_assets.lib.file_names import RunFiles


def check_fresh_output(files: RunFiles, *, overwrite: bool) -> None:
    if overwrite:
        return
    for path in (files.output, files.sidecar):
        if path.exists():
            raise ReverifyError(
                f"Output file already exists: '{path}'. Pass --overwrite to delete it and start fresh, "
                "or --resume to continue from it."
            )


def start_fresh(files: RunFiles) -> None:
    """Remove what an earlier run left; the sidecar is recreated even when it stays empty, as NeMo Gym does."""
    for path in (files.output, files.sidecar, files.metrics):
        path.unlink(missing_ok=True)
    files.sidecar.parent.mkdir(parents=True, exist_ok=True)
    files.sidecar.touch()

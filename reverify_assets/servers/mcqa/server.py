"""The built-in ``mcqa`` resources server: NeMo Gym's multiple-choice grading behind its HTTP protocol."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from reverify_assets.metrics import mcqa as mcqa_metrics
from reverify_assets.rows.row_fields import is_mapping
from reverify_assets.servers.mcqa.grading import (
    MCQAInputError,
    effective_mode,
    grade,
    template_metadata_kwargs,
)
from reverify_assets.servers.protocol import BadVerifyRequest, MetricsHooks, ResourcesServer, ReverifyMode


class MCQAServerConfig(BaseModel):
    # NeMo Gym's own config block carries descriptive fields (entrypoint, domain, description, ...):
    # they are accepted so that a pasted block works, and ignored. Any other field is refused, with a
    # spelling hint, by config.known_fields.
    model_config = ConfigDict(extra="allow")

    grading_mode: (
        Literal["strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon", "lenient_answer_colon_md"] | None
    ) = None


class MCQAServer(ResourcesServer):
    """Grades a stored response from the request alone, so re-verifying it is exactly as good as verifying it."""

    reverify_mode: ClassVar[ReverifyMode] = ReverifyMode.STATELESS
    metrics_hooks: ClassVar[MetricsHooks] = MetricsHooks(mcqa_metrics.compute_metrics, mcqa_metrics.get_key_metrics)
    verify_waits: ClassVar[bool] = False

    def __init__(self, config: MCQAServerConfig) -> None:
        self.config = config

    async def verify(self, body: dict[str, Any]) -> dict[str, Any]:
        response = body.get("response")
        if not is_mapping(response):
            raise BadVerifyRequest("`response` must be an object (a Responses API response)")
        options = body.get("options")
        if options is not None and not isinstance(options, list):
            raise BadVerifyRequest("`options` must be a list of single-key objects")
        expected = body.get("expected_answer")
        if expected is not None and not isinstance(expected, str):
            raise BadVerifyRequest("`expected_answer` must be a string")
        template_metadata = body.get("template_metadata")
        if template_metadata is not None and not is_mapping(template_metadata):
            raise BadVerifyRequest("`template_metadata` must be an object")
        if "grading_mode" in body and body["grading_mode"] is None:
            raise BadVerifyRequest("`grading_mode` may be omitted but not null")
        try:
            mode = effective_mode(self.config.grading_mode, body.get("grading_mode"))
            result = grade(
                response=response,
                options=options,
                expected_answer=expected,
                mode=mode,
                **template_metadata_kwargs(template_metadata),
            )
        except MCQAInputError as exc:
            raise BadVerifyRequest(str(exc)) from exc
        return {
            "responses_create_params": body.get("responses_create_params"),
            "response": response,
            "reward": result.reward,
            "mask_sample": False,
            "failure_kind": None,
            "failure_reason": None,
            "expected_answer": result.expected_answer,
            "extracted_answer": result.extracted_answer,
        }

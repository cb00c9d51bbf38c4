"""The fields of an ``equivalence_judge`` config block.

Field names follow NeMo Gym's ``equivalence_llm_judge`` where it has them (``judge_system_message``,
``judge_equal_label``, ``check_twice_swap``, the regex extractors, ...); the judge itself is reached
directly over an OpenAI-compatible API (``judge_base_url``, ``judge_model``) instead of through a NeMo Gym
model server. NeMo Gym's descriptive fields of a pasted block (``judge_model_server``, ``domain``, ...) are
accepted and ignored; any other field is refused, with a spelling hint (``config.known_fields``).

Timing: one judge call takes at most ``max_attempts * timeout_s`` plus the backoff waits; the defaults
(3 x 30 s + at most 2 + 4 s) stay under the 120 s reverify allows one ``/verify`` call.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from reverify_assets.config.server_url import url_problem
from reverify_assets.rows.verifier_wire import RetryPolicy
from reverify_assets.servers.judge.prompt import DEFAULT_PROMPT_TEMPLATE, check_template
from reverify_assets.servers.judge.verdict import EQUAL_LABEL, NOT_EQUAL_LABEL

DEFAULT_LOCAL_JUDGE_URL = "http://127.0.0.1:8765"
DEFAULT_JUDGE_MODEL = "local-equivalence-judge"
DEFAULT_API_KEY_ENV = "JUDGE_API_KEY"
# Where a key pasted into the config by mistake would be: refused, so it never reaches a hash, a log or a row.
_KEY_FIELDS = ("api_key", "judge_api_key", "openai_api_key")


class EquivalenceJudgeConfig(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    judge_base_url: str = DEFAULT_LOCAL_JUDGE_URL
    judge_model: str = DEFAULT_JUDGE_MODEL
    api_key_env: str | None = Field(
        default=DEFAULT_API_KEY_ENV,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="name of the environment variable holding the API key (sent as a Bearer token if set)",
    )
    prompt_template: str = Field(
        default=DEFAULT_PROMPT_TEMPLATE, validation_alias=AliasChoices("prompt_template", "judge_prompt_template")
    )
    judge_system_message: str | None = None
    judge_equal_label: str = EQUAL_LABEL
    judge_not_equal_label: str = NOT_EQUAL_LABEL

    temperature: float | None = Field(default=0.0, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=1024, gt=0)

    timeout_s: float = Field(default=30.0, gt=0, description="per attempt")
    max_attempts: int = Field(default=3, ge=1)
    retry_base_wait_s: float = Field(default=2.0, ge=0)
    retry_max_wait_s: float = Field(default=30.0, ge=0)
    judge_endpoint_max_concurrency: int | None = Field(default=64, gt=0)

    question_extract_regex: str | None = None
    response_extract_regex: str | None = None
    msg_extraction_failure: str = "[NO VALID ANSWER EXTRACTED]"
    max_answer_chars: int | None = Field(default=None, gt=0)

    check_twice_swap: bool = False
    reward_if_swap_fails: float = 0.0

    # Per-record regex (``template_metadata.output_regex``): NeMo Gym's code defaults. They change nothing
    # for rows without such a regex.
    use_per_record_regex: bool = True
    extraction_length_threshold: int | None = 120
    check_full_generation_on_fail: bool = True
    reward_if_full_generation_succeeds: float = 0.5

    @model_validator(mode="before")
    @classmethod
    def _refuse_inline_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            pasted = [name for name in _KEY_FIELDS if data.get(name)]
            if pasted:
                # The message names the field, never its value.
                raise ValueError(
                    f"`{pasted[0]}` is not read from the config: put the key in an environment variable "
                    "and name that variable in `api_key_env`"
                )
        return data

    @field_validator("prompt_template")
    @classmethod
    def _template_fills(cls, template: str) -> str:
        check_template(template)
        return template

    @field_validator("judge_base_url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if (problem := url_problem(url)) is not None:
            raise ValueError(f"{url!r}: {problem}")
        return url

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            attempts=self.max_attempts,
            base_delay_s=self.retry_base_wait_s,
            max_delay_s=self.retry_max_wait_s,
            timeout_s=self.timeout_s,
        )

    def sampling_params(self) -> dict[str, Any]:
        params = {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}
        return {name: value for name, value in params.items() if value is not None}

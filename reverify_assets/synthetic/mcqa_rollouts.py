"""Synthetic mcqa rollouts in NeMo Gym's file formats, for tests, samples and benchmarks.

Writes the pair `gym eval run` leaves behind for the `mcqa` environment (docs/nemo-gym-contract.md §2.1,
§2.2): `rollouts_materialized_inputs.jsonl` in dispatch order and `rollouts.jsonl` in a seeded completion
order. Row shapes and key order copy real NeMo Gym files (tests/data/conformance/mcqa). The answers come in
the many formats real models produce, so the grading modes disagree and re-verification changes rewards.
Each rollout stores the reward the original verifier gave it (its row's own `grading_mode`), computed with
`reverify_assets.servers.mcqa.grading`, exactly as `gym eval run` would have stored it. The seeded draws,
the completion order, the environment-independent row shapes and the file writer come from
`reverify_assets.synthetic.nemo_gym_rows`, shared with the other generators.

Every row is a pure function of the spec and its `(task index, rollout index)` key, so both files are
streamed: memory is constant in the number of rows (the generator is asked for millions), and the output
is byte-identical for a given seed.

    python -m reverify_assets.synthetic.mcqa_rollouts --tasks 75 --rollouts-per-task 4 --seed 7 --out DIR
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Final

from reverify_assets.servers.mcqa import grading
from reverify_assets.synthetic.nemo_gym_rows import (
    INPUTS_FILE_NAME,
    RESULT_TYPE,
    ROLLOUTS_FILE_NAME,
    Row,
    agent_ref,
    approx_tokens,
    between,
    derived_seed,
    distinct,
    finished_response,
    generator_main,
    in_completion_order,
    in_dispatch_order,
    message_item,
    pick,
    reasoning_item,
    responses_create_params,
    write_dataset,
)

__all__ = [
    "INPUTS_FILE_NAME",
    "ROLLOUTS_FILE_NAME",
    "SyntheticSpec",
    "iter_input_rows",
    "iter_rollout_rows",
    "main",
    "write_mcqa_dataset",
]


@dataclass(frozen=True)
class SyntheticSpec:
    tasks: int
    rollouts_per_task: int = 4
    seed: int = 0
    agent_name: str = "mcqa_simple_agent"

    def __post_init__(self) -> None:
        if self.tasks < 1:
            raise ValueError(f"tasks must be >= 1, got {self.tasks}")
        if self.rollouts_per_task < 1:
            raise ValueError(f"rollouts_per_task must be >= 1, got {self.rollouts_per_task}")

    @property
    def rows(self) -> int:
        return self.tasks * self.rollouts_per_task


# --- constants ----------------------------------------------------------------------------------------------

# The name real NeMo Gym mcqa output gives its environment server.
_ENVIRONMENT_SERVER: Final = "mcqa_environment_server"
_LETTERS: Final = "ABCDEFGHIJ"

# The mcqa dataset's own instruction (strict rows), and a second style of benchmark prompt (lenient rows).
_STRICT_INSTRUCTION: Final = (
    "You should output your final response letter inside \\boxed{} and nothing else You can first think step-by-step. "
)
_LENIENT_INSTRUCTION: Final = (
    "Answer the following multiple choice question. Think step by step, then put your final answer "
    "inside \\boxed{}.\n\n"
)

# Option counts of public benchmarks: 4 (MMLU, GPQA) and 10 (MMLU-Pro) dominate, the rest are rarer.
_OPTION_COUNTS: Final = (4, 5, 6, 7, 8, 9, 10)
_OPTION_COUNT_CUM_WEIGHTS: Final = (40, 50, 55, 60, 65, 70, 100)
# Most datasets leave the mode at its default; a minority ask for the lenient one.
_LENIENT_ROW_SHARE: Final = 0.15
# Share of rollouts from a reasoning model (a reasoning item precedes the message).
_REASONING_SHARE: Final = 0.15
# Share of wrong answers that name a letter past the last option, as models sometimes do.
_OUT_OF_RANGE_SHARE: Final = 0.03

# --- vocabulary ---------------------------------------------------------------------------------------------

_DOMAINS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("molecular biology", (
        "ribosome", "promoter region", "mRNA transcript", "chaperone protein", "operon", "histone tail",
        "tRNA pool", "spliceosome", "enhancer element", "RNA polymerase", "lysosome", "signal peptide",
    )),
    ("thermodynamics", (
        "working fluid", "heat reservoir", "entropy production", "piston", "isothermal stage",
        "adiabatic wall", "Carnot cycle", "internal energy", "specific heat", "phase boundary",
        "enthalpy of mixing", "control volume",
    )),
    ("macroeconomics", (
        "central bank", "money supply", "policy rate", "output gap", "exchange rate", "fiscal deficit",
        "price level", "labour market", "yield curve", "consumption function", "tax multiplier",
        "current account",
    )),
    ("organic chemistry", (
        "carbocation", "nucleophile", "leaving group", "aromatic ring", "carbonyl carbon", "solvent shell",
        "transition state", "enolate", "protecting group", "alkyl halide", "Grignard reagent", "stereocentre",
    )),
    ("geology", (
        "mantle plume", "subduction zone", "sediment layer", "fault plane", "magma chamber", "aquifer",
        "basalt flow", "continental crust", "glacial moraine", "karst system", "mid-ocean ridge",
        "metamorphic facies",
    )),
    ("computer architecture", (
        "branch predictor", "L1 data cache", "reorder buffer", "TLB", "memory controller", "pipeline stage",
        "register file", "store buffer", "hardware prefetcher", "coherence protocol", "issue queue",
        "page table walker",
    )),
    ("astrophysics", (
        "accretion disk", "neutron star", "main-sequence star", "interstellar medium", "dark matter halo",
        "stellar wind", "red giant envelope", "event horizon", "protoplanetary disk", "white dwarf",
        "galactic bar", "cosmic-ray flux",
    )),
    ("immunology", (
        "helper T cell", "antibody titre", "antigen-presenting cell", "complement cascade", "cytokine signal",
        "B cell receptor", "memory B cell", "macrophage", "MHC class II molecule", "natural killer cell",
        "germinal centre", "regulatory T cell",
    )),
    ("statistics", (
        "sample mean", "confidence interval", "null hypothesis", "standard error", "prior distribution",
        "likelihood function", "test statistic", "regression slope", "residual variance", "p-value",
        "bootstrap estimate", "effect size",
    )),
    ("ecology", (
        "keystone predator", "primary producer", "trophic cascade", "carrying capacity", "invasive species",
        "nitrogen cycle", "pollinator network", "decomposer community", "habitat corridor",
        "population density", "niche overlap", "soil seed bank",
    )),
)  # fmt: skip

_VERBS: Final = (
    "increases", "decreases", "stabilises", "saturates", "reverses", "inhibits", "amplifies", "shifts",
    "destabilises", "dampens", "accelerates", "masks",
)  # fmt: skip
# For "both X and Y ..." options, which need a plural verb.
_PLURAL_VERBS: Final = ("rise", "fall", "stabilise", "saturate", "oscillate", "decouple")
_ROLES: Final = (
    "buffer", "catalyst", "bottleneck", "reference point", "feedback signal", "constraint", "sink",
)  # fmt: skip
_ADJECTIVES: Final = (
    "more sensitive", "less sensitive", "rate-limiting", "saturated", "unstable", "dominant",
)  # fmt: skip

_QUESTION_TEMPLATES: Final = (
    "In {domain}, which of the following best explains why the {a} {verb} the {b} when the {c} is held constant?",
    "A study in {domain} finds that the {a} {verb} sharply after the {b} is perturbed. Which statement is "
    "most consistent with this finding?",
    "Which of the following statements about the {a} in {domain} is correct, given that the {b} is at steady state?",
    "Consider a {domain} model in which the {a} interacts with the {b}. What happens to the {c} as the {a} grows?",
    "In {domain}, what is the primary role of the {a} with respect to the {b} under typical conditions?",
)
# Short on purpose: real benchmark options are a few words, and their length sets the I/O per row.
_OPTION_TEMPLATES: Final = (
    "The {x} {verb} the {y}",
    "It {verb} the {x} but not the {y}",
    "The {x} acts as a {role} for the {y}",
    "The {y} becomes {adj}",
    "Only the {x} changes",
    "It depends on the {x}, not the {y}",
    "Both the {x} and the {y} {plural_verb}",
)
# Mostly empty: a detail clause on every option makes prompts longer than real benchmark ones.
_OPTION_DETAILS: Final = ("", "", "", "", "", "", ", via the {z}", " if the {z} is fixed")

_FILLER: Final = (
    "Let me think about this step by step.",
    "First, recall how the {a} is usually defined in {domain}.",
    "The question hinges on the relationship between the {a} and the {b}.",
    "Option {x} contradicts the basic behaviour of the {b}, so it can be ruled out.",
    "Option {x} sounds plausible, but it ignores the {c}.",
    "Checking a limiting case: if the {b} vanished, the {a} should be unaffected.",
    "This is consistent with the standard results in {domain}.",
    "Comparing the remaining candidates carefully, only one of them respects that constraint.",
    "I should double-check the direction of the effect before committing.",
    "Options {x} and {y} differ only in what happens to the {c}.",
    "The wording about the {b} being perturbed matters here.",
    "A common misconception is that the {c} drives the change, but the mechanism runs through the {a}.",
)
_REASONING_TITLES: Final = (
    "**Analyzing the {a}**", "**Weighing the options**", "**Considering the role of the {b}**",
    "**Evaluating {domain} principles**",
)  # fmt: skip
_LEAD_INS: Final = ("", "The answer is ", "So the final answer is ", "Therefore, the correct choice is ")


# --- answer formats -----------------------------------------------------------------------------------------
# (name, weight). The mix decides how far apart the grading modes land: strict accepts the first five,
# lenient_boxed also the three that box the option text, the `Answer:` family only the colon modes.
_FORMATS: Final[tuple[tuple[str, int], ...]] = (
    ("boxed", 50),  # \boxed{C}
    ("boxed_paren", 5),  # \boxed{(C)}
    ("boxed_text", 5),  # \boxed{\text{C}}
    ("boxed_letter_colon_text", 5),  # \boxed{C: option text}
    ("two_boxes", 4),  # \boxed{B} ... \boxed{C}: the last box wins
    ("boxed_option_text", 12),  # \boxed{option text}: only lenient_boxed
    ("boxed_sentence_option_text", 6),  # \boxed{The correct option is option text}: only lenient_boxed
    ("boxed_paren_letter_text", 5),  # \boxed{(C) option text}: only lenient_boxed
    ("boxed_lowercase", 4),  # \boxed{c}
    ("boxed_or", 3),  # \boxed{A or C}
    ("answer_colon", 5),  # Answer: C
    ("answer_colon_bold", 3),  # **Answer: C**
    ("answer_colon_dollar", 2),  # Answer: $C$
    ("final_answer_colon", 2),  # final answer: C
    ("no_answer", 4),  # reasoning that never concludes
    ("empty", 2),  # an empty message
)
_FORMAT_NAMES: Final = tuple(name for name, _ in _FORMATS)
_FORMAT_CUM_WEIGHTS: Final = tuple(sum(weight for _, weight in _FORMATS[: i + 1]) for i in range(len(_FORMATS)))


# --- per-task content ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Task:
    index: int
    uuid: str
    domain: str
    nouns: tuple[str, ...]
    prompt: str
    options: tuple[tuple[str, str], ...]  # (letter, text)
    expected_answer: str
    grading_mode: str
    # Chance that a rollout picks the right letter; varying it per task makes pass@k differ from pass@1.
    skill: float


def _make_options(rng: Random, nouns: tuple[str, ...], count: int) -> tuple[str, ...]:
    texts: list[str] = []
    normalised: list[str] = []
    attempt = 0
    while len(texts) < count:
        x, y, z = distinct(rng, nouns, 3)
        text = pick(rng, _OPTION_TEMPLATES).format(
            x=x,
            y=y,
            verb=pick(rng, _VERBS),
            plural_verb=pick(rng, _PLURAL_VERBS),
            role=pick(rng, _ROLES),
            adj=pick(rng, _ADJECTIVES),
        ) + pick(rng, _OPTION_DETAILS).format(z=z)
        attempt += 1
        if attempt > 30:
            # Vanishingly rare, but the loop must end whatever the draws: a numbered clause is always new.
            text += f" (case {attempt})"
        norm = " ".join(text.lower().split())
        # No option may contain another: lenient_boxed matches option text by substring, and an answer that
        # quotes its option text should map to that one letter.
        if any(norm in other or other in norm for other in normalised):
            continue
        texts.append(text)
        normalised.append(norm)
    return tuple(texts)


def _make_task(seed: int, index: int) -> _Task:
    rng = Random(derived_seed(seed, "task", index))
    domain, nouns = pick(rng, _DOMAINS)
    a, b, c = distinct(rng, nouns, 3)
    question = pick(rng, _QUESTION_TEMPLATES).format(domain=domain, a=a, b=b, c=c, verb=pick(rng, _VERBS))
    count = rng.choices(_OPTION_COUNTS, cum_weights=_OPTION_COUNT_CUM_WEIGHTS)[0]
    texts = _make_options(rng, nouns, count)
    options = tuple(zip(_LETTERS, texts, strict=False))
    lenient = rng.random() < _LENIENT_ROW_SHARE
    if lenient:
        prompt = _LENIENT_INSTRUCTION + question + "\n\n" + "\n".join(f"{k}) {v}" for k, v in options)
    else:
        prompt = _STRICT_INSTRUCTION + question + "\n" + "\n".join(f"{k}: {v}" for k, v in options)
    # Skewed towards easy, with a tail of tasks the model almost never gets right.
    skill = min(0.97, rng.random() ** 0.3)
    return _Task(
        index=index,
        uuid=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        domain=domain,
        nouns=(a, b, c),
        prompt=prompt,
        options=options,
        expected_answer=pick(rng, options)[0],
        grading_mode="lenient_boxed" if lenient else grading.DEFAULT_ROW_GRADING_MODE,
        skill=skill,
    )


# --- per-rollout content ------------------------------------------------------------------------------------


def _filler(rng: Random, task: _Task, sentences: int) -> str:
    a, b, c = task.nouns
    letters = [k for k, _ in task.options]
    out: list[str] = []
    # Without replacement: a model rarely repeats a sentence word for word.
    for template in distinct(rng, _FILLER, min(sentences, len(_FILLER))):
        x, y = distinct(rng, letters, 2)
        out.append(template.format(a=a, b=b, c=c, x=x, y=y, domain=task.domain))
    return " ".join(out)


def _pick_letter(rng: Random, task: _Task) -> str:
    if rng.random() < task.skill:
        return task.expected_answer
    if len(task.options) < len(_LETTERS) and rng.random() < _OUT_OF_RANGE_SHARE:
        return _LETTERS[len(task.options)]
    return pick(rng, [k for k, _ in task.options if k != task.expected_answer])


def _render_answer(rng: Random, task: _Task, fmt: str, letter: str) -> str:
    """The closing part of the message for answer `letter` in format `fmt` (after the reasoning prose)."""
    option_text = dict(task.options).get(letter, "none of the listed options")
    other = pick(rng, [k for k, _ in task.options if k != letter])
    lead = pick(rng, _LEAD_INS)
    renderers: dict[str, Callable[[], str]] = {
        "boxed": lambda: f"{lead}\\boxed{{{letter}}}",
        "boxed_paren": lambda: f"{lead}\\boxed{{({letter})}}",
        "boxed_text": lambda: f"Final answer: \\boxed{{\\text{{{letter}}}}}",
        "boxed_letter_colon_text": lambda: f"{lead}\\boxed{{{letter}: {option_text}}}",
        "two_boxes": lambda: (
            f"At first glance it looks like \\boxed{{{other}}}, but that ignores the {task.nouns[1]}. "
            f"Correcting for it, the answer is \\boxed{{{letter}}}"
        ),
        "boxed_option_text": lambda: f"Therefore the correct choice is \\boxed{{{option_text}}}",
        "boxed_sentence_option_text": lambda: f"\\boxed{{\\text{{The correct option is: {option_text}}}}}",
        "boxed_paren_letter_text": lambda: f"{lead}\\boxed{{({letter}) {option_text}}}",
        "boxed_lowercase": lambda: f"{lead}\\boxed{{{letter.lower()}}}",
        "boxed_or": lambda: "\\boxed{{{} or {}}}".format(*distinct(rng, (letter, other), 2)),
        "answer_colon": lambda: f"Answer: {letter}",
        "answer_colon_bold": lambda: f"**Answer: {letter}**",
        "answer_colon_dollar": lambda: f"Answer: ${letter}$",
        "final_answer_colon": lambda: f"So my final answer: {letter}",
        "no_answer": lambda: (
            f"I cannot decide between options {letter} and {other} without more information about the {task.nouns[2]}."
        ),
        "empty": lambda: "",
    }
    return renderers[fmt]()


def _make_response(seed: int, task: _Task, rollout: int, dispatch_index: int) -> Row:
    rng = Random(derived_seed(seed, "rollout", task.index, rollout))
    fmt = rng.choices(_FORMAT_NAMES, cum_weights=_FORMAT_CUM_WEIGHTS)[0]
    letter = _pick_letter(rng, task)
    has_reasoning = rng.random() < _REASONING_SHARE
    hex_id = f"{rng.getrandbits(192):048x}"

    output: list[Row] = []
    reasoning_tokens = 0
    if has_reasoning:
        title = pick(rng, _REASONING_TITLES).format(a=task.nouns[0], b=task.nouns[1], domain=task.domain)
        summary = title + "\n\n" + _filler(rng, task, between(rng, 3, 7))
        # The summary is a digest: the hidden chain of thought it stands for is several times longer.
        reasoning_tokens = approx_tokens(summary) * between(rng, 3, 8)
        output.append(reasoning_item(f"rs_{rng.getrandbits(192):048x}", summary))
        prose = _filler(rng, task, 1)
    else:
        prose = _filler(rng, task, between(rng, 1, 4))
    if fmt == "empty":
        text = ""
    elif fmt == "no_answer":
        text = prose + " " + _render_answer(rng, task, fmt, letter)
    else:
        text = prose + " \n\n" + _render_answer(rng, task, fmt, letter)
    output.append(message_item(f"msg_{hex_id}", text))

    return finished_response(rng, hex_id, task.prompt, output, text, reasoning_tokens, dispatch_index)


def _options_field(task: _Task) -> list[Row]:
    return [{k: v} for k, v in task.options]


def _rollout_row(spec: SyntheticSpec, task: _Task, rollout: int) -> Row:
    response = _make_response(spec.seed, task, rollout, task.index * spec.rollouts_per_task + rollout)
    options = _options_field(task)
    # What the original verifier stored: the row's own mode, no server override.
    verdict = grading.grade(
        response=response,
        options=options,
        expected_answer=task.expected_answer,
        mode=grading.effective_mode(None, task.grading_mode),
    )
    return {
        "responses_create_params": responses_create_params(task.prompt),
        "response": response,
        "reward": verdict.reward,
        "mask_sample": False,
        "failure_kind": None,
        "failure_reason": None,
        "expected_answer": verdict.expected_answer,
        "extracted_answer": verdict.extracted_answer,
        "_ng_task_index": task.index,
        "_ng_rollout_index": rollout,
        "agent_ref": agent_ref(spec.agent_name),
        "_ng_environment_server": _ENVIRONMENT_SERVER,
        "_ng_result_type": RESULT_TYPE,
    }


# --- rows and files -----------------------------------------------------------------------------------------


def iter_input_rows(spec: SyntheticSpec) -> Iterator[Row]:
    """`rollouts_materialized_inputs.jsonl` rows in dispatch order: t0r0, t0r1, ..., t1r0, ..."""
    ref = agent_ref(spec.agent_name)

    def task_fields(index: int) -> Row:
        task = _make_task(spec.seed, index)
        return {
            "responses_create_params": {"input": [{"role": "user", "content": task.prompt}]},
            "options": _options_field(task),
            "expected_answer": task.expected_answer,
            "grading_mode": task.grading_mode,
            "uuid": task.uuid,
            "agent_ref": ref,
        }

    return in_dispatch_order(spec, task_fields)


def iter_rollout_rows(spec: SyntheticSpec) -> Iterator[Row]:
    """`rollouts.jsonl` rows in a seeded completion order (every key exactly once)."""
    return in_completion_order(spec, lambda task, rollout: _rollout_row(spec, _make_task(spec.seed, task), rollout))


def write_mcqa_dataset(out_dir: Path, spec: SyntheticSpec) -> tuple[Path, Path]:
    """Write both files of a synthetic mcqa run into `out_dir`; return (inputs_path, rollouts_path)."""
    return write_dataset(out_dir, iter_input_rows(spec), iter_rollout_rows(spec))


# --- command line -------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    return generator_main(
        argv,
        module="reverify_assets.synthetic.mcqa_rollouts",
        what="mcqa run",
        default_agent="mcqa_simple_agent",
        make_spec=SyntheticSpec,
        write=write_mcqa_dataset,
    )


if __name__ == "__main__":
    sys.exit(main())

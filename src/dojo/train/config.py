"""``dojo train``'s configuration: one YAML file, validated, every field documented.

``TrainConfig()`` is the embedded default that ``make demo`` runs: the tiny model built locally,
dojo's ``identify`` task family, a warm start from demonstrations, then GRPO. ``load_config(path)``
reads a YAML file whose keys mirror these models (unknown keys are errors, so a typo never passes
silently); ``dojo train --print-config`` writes the defaults out as a starting point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dojo.agent.tiny_model import TinyModelSpec
from dojo.errors import InputError, field_problems
from dojo.rewards.config import GradingConfig
from dojo.sandbox import Limits
from dojo.user_files import read_user_text


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskSettings(_Section):
    source: str = Field(
        "family:identify",
        description="Where training tasks come from: any `dojo tasks` source (family:NAME, humaneval, "
        "reasoning_gym:NAME, a .jsonl file). Procedural families are generated with `train_size` tasks.",
    )
    train_size: int = Field(20000, ge=1, description="Training tasks drawn from a procedural family.")
    held_out_size: int = Field(200, ge=1, description="Held-out tasks (never trained on) for the before/after report.")
    difficulty: tuple[float, float] = Field((0.0, 1.0), description="Difficulty range (0..1) of generated tasks.")

    @model_validator(mode="after")
    def _range(self) -> TaskSettings:
        low, high = self.difficulty
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"difficulty must be [low, high] with 0 <= low <= high <= 1, got {list(self.difficulty)}")
        return self


class CurriculumSettings(_Section):
    enabled: bool = Field(True, description="Draw tasks by difficulty level and running pass rate.")
    start_level: float = Field(0.5, ge=0.0, le=1.0, description="Difficulty level the curriculum starts at.")
    promote_at: float = Field(0.6, gt=0.0, le=1.0, description="Move the level up when the recent pass rate is above.")
    demote_at: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Move the level down when the recent pass rate is below (0: never). A warm start that "
        "hard-codes starts below any such threshold because it games the tests, not because the tasks are too "
        "hard; demoting it then trains on the easy levels only and the others are forgotten.",
    )
    width: float = Field(
        1.5,
        gt=0.0,
        description="How far from the level tasks are still drawn (a Gaussian width): wide keeps every level "
        "in training, so that none is forgotten, and leans towards the level.",
    )


class PolicySettings(_Section):
    model: str = Field(
        "tiny",
        description="`tiny` builds dojo's ~0.26 M-parameter model and tokenizer locally (nothing downloaded); "
        "otherwise the path of a local Hugging Face model directory.",
    )
    tiny: TinyModelSpec = Field(default_factory=TinyModelSpec, description="Shape of the tiny model.")
    server: str | list[str] | None = Field(
        None,
        description="Generate GRPO's episodes with a served policy at this OpenAI-compatible URL (e.g. "
        "http://127.0.0.1:8000/v1, `dojo policy serve MODEL --prompt-format text`) instead of in process; the "
        "trainer's weights are pushed to it (POST /update_weights_from_disk) before each step's generation. "
        "A list of URLs (servers of one model) forms a policy pool: least requests, failover, and a server "
        "that missed a weight push gets no request until it loads the next.",
    )

    @model_validator(mode="after")
    def _server(self) -> PolicySettings:
        for url in self.servers:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"policy.server must be an http(s) URL (or a list of them), got {url!r}")
        if isinstance(self.server, list) and not self.server:
            raise ValueError("policy.server is an empty list: give one URL or several, or leave it out")
        return self

    @property
    def servers(self) -> list[str]:
        if self.server is None:
            return []
        return [self.server] if isinstance(self.server, str) else list(self.server)


class EpisodeSettings(_Section):
    mode: Literal["single", "feedback", "tools"] = Field(
        "single",
        description="What one training (and held-out) episode is: `single` (one reply, graded), `feedback` (the "
        "reply's code runs on the task's visible tests and the failures come back as the next turn, up to "
        "`max_turns` replies: code, run, error, fix), or `tools` (the model calls dojo's tools).",
    )
    max_turns: int = Field(2, ge=1, le=16, description="Replies per episode in `feedback` and `tools` modes.")


DemonstrationKind = Literal["reference", "readings", "noisy", "confused", "hardcoded"]
"""What the warm start imitates (see ``dojo.train.data.demonstrations``)."""


class WarmStartSettings(_Section):
    steps: int = Field(1800, ge=0, description="Supervised steps before GRPO (0 skips the warm start).")
    batch_size: int = Field(32, ge=1, description="Examples per supervised step.")
    learning_rate: float = Field(3e-3, gt=0.0, description="Peak learning rate (cosine schedule).")
    share: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="Fraction of the training tasks the warm start learns from; GRPO trains on the others, "
        "prompts the warm start never saw, so that what GRPO gains is what carries over (1: both use all).",
    )
    demonstrations: DemonstrationKind = Field(
        "hardcoded",
        description="`reference`: the task's reference solution; `readings`: a random one of the family's "
        "plausible answers (arith: the task's constants in a random shape; identify: any of the 16 functions), "
        "so the model learns the form and GRPO must learn the choice; `noisy`: a demonstrator that is right "
        "only `correct_share` of the time and otherwise gives another plausible answer; `confused`: the same, "
        "but its mistakes are systematic (identify: it mixes up pairs such as `x * 2` and `x + 2`); `hardcoded`: "
        "when wrong, the teacher returns the first example's output as a constant (it hard-codes the test instead "
        "of solving the task). Tasks of a source without plausible answers (or examples) get the reference.",
    )
    prompt_loss: bool = Field(
        True,
        description="Learn the prompts' tokens too, not only the completions: a prompt's examples are true facts "
        "about its task even where the demonstration is wrong (false: completion-only loss).",
    )
    fix_share: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="With `episode.mode: feedback`: the share of tasks that also get a two-reply demonstration "
        "(a wrong reply, the sandbox's real feedback on it, then the right one), so that the model has seen a "
        "fix before GRPO rewards it (0: single-reply demonstrations only).",
    )
    correct_share: float = Field(
        0.3,
        ge=0.0,
        le=1.0,
        description="With `demonstrations: noisy`, `confused` or `hardcoded`: the share of right demonstrations.",
    )


class GRPOSettings(_Section):
    steps: int = Field(200, ge=1, description="Optimizer steps of GRPO.")
    prompts_per_step: int = Field(8, ge=1, description="Task groups trained on per step.")
    group_size: int = Field(8, ge=2, description="Completions per task (a GRPO group).")
    learning_rate: float = Field(1e-4, gt=0.0, description="Learning rate (constant after warm-up).")
    warmup_steps: int = Field(30, ge=0, description="Linear warm-up steps.")
    temperature: float = Field(
        1.0, gt=0.0, allow_inf_nan=False, description="Sampling temperature of training completions."
    )
    max_completion_tokens: int = Field(24, ge=1, description="Longest reply, in tokens (per turn).")
    beta: float = Field(0.0, ge=0.0, description="KL coefficient against the start model (0: no reference model).")
    epsilon: float = Field(0.2, gt=0.0, description="PPO clip range.")
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo"] = Field("dapo", description="TRL's loss aggregation.")
    oversample: float = Field(
        1.5,
        ge=1.0,
        description="Dynamic sampling: generate this many times `prompts_per_step` groups and train on the "
        "informative ones (rewards that differ) first; 1 turns it off.",
    )


class RewardSettings(_Section):
    mode: Literal["default", "fraction", "binary"] = Field(
        "binary", description="Tests to reward: fraction passed, 1/0.5/0 (default), or all-or-nothing."
    )
    scan: bool = Field(True, description="Static reward-hack scan of candidates (a confirmed hack scores 0).")
    call_rules: Literal["task", "bfcl", "strict"] = Field(
        "task", description="Tool calls checked by BFCL's rules (bfcl), without its quirks (strict), or as tasks say."
    )


class SandboxSettings(_Section):
    pool_size: int = Field(2, ge=1, le=256, description="Warm sandbox slots grading in parallel.")
    cpu_time: float = Field(2.0, gt=0.0, description="CPU seconds per grading run.")
    wall_time: float = Field(5.0, gt=0.0, description="Wall seconds per grading run.")
    memory_mb: int = Field(256, ge=16, description="Memory limit per grading run, MiB.")
    ray: str | None = Field(
        None,
        description="Run episodes on the sandbox fleet of this Ray cluster (HOST:PORT of its head, or auto); "
        "pool_size is then slots per node.",
    )


class EvalSettings(_Section):
    samples: int = Field(4, ge=1, description="Sampled completions per held-out task (at the training temperature).")
    every: int = Field(0, ge=0, description="Also evaluate every N GRPO steps (0: only before and after).")


class OutputSettings(_Section):
    dir: Path = Field(
        Path("runs/dojo-train"), description="Where checkpoints, trajectories, metrics and the report go."
    )
    save_every: int = Field(25, ge=1, description="Checkpoint every N GRPO steps (and on Ctrl-C).")
    keep_checkpoints: int = Field(2, ge=1, description="Checkpoints kept on disk (the newest).")
    tensorboard: bool = Field(True, description="Write TensorBoard event files under `<dir>/tensorboard`.")
    mirror: str | None = Field(
        None,
        description="Copy the run directory (checkpoints, trajectories, metrics, report) to this fsspec URL "
        "(s3://bucket/prefix) at every checkpoint and at the end; MANIFEST.json names the complete files.",
    )


class JudgeAgreementSettings(_Section):
    """The run's judge checked against people's labels while it trains (``dojo.rewards.agreement``)."""

    review_dir: Path = Field(
        description="The review set `dojo judge sample` writes (items.jsonl); its labels.jsonl grows while people "
        "label (`dojo judge label`). It need not exist yet when the run starts: labels may come later."
    )
    threshold: float = Field(
        0.75,
        description="Alert (judge/agreement_alert = 1, a warning logged) when the share of labelled items on which "
        "the judge agrees with the people's majority falls below this (0..1).",
    )
    min_items: int = Field(20, ge=1, description="Labelled items needed before an alert can be raised.")

    @field_validator("threshold")
    @classmethod
    def _share(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"threshold is a share of items between 0 and 1 (0.75 = 75%), got {value}")
        return value

    @field_validator("review_dir")
    @classmethod
    def _directory(cls, value: Path) -> Path:
        if value.exists() and not value.is_dir():
            raise ValueError(f"{str(value)!r} is a file; give the review directory `dojo judge sample --out` wrote")
        return value


class TrainConfig(_Section):
    """Everything ``dojo train`` needs. Every section has defaults; a YAML file overrides any of them."""

    seed: int = Field(0, description="Seeds the model, the task draws and the sampling.")
    threads: int = Field(
        2, ge=1, description="Torch CPU threads (2 uses both cores of a 2-core machine: ~1.5x faster SFT steps than 1)."
    )
    tasks: TaskSettings = Field(default_factory=TaskSettings)
    curriculum: CurriculumSettings = Field(default_factory=CurriculumSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    warm_start: WarmStartSettings = Field(default_factory=WarmStartSettings)
    grpo: GRPOSettings = Field(default_factory=GRPOSettings)
    episode: EpisodeSettings = Field(default_factory=EpisodeSettings)
    reward: RewardSettings = Field(default_factory=RewardSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    eval: EvalSettings = Field(default_factory=EvalSettings)
    output: OutputSettings = Field(default_factory=OutputSettings)
    judge_agreement: JudgeAgreementSettings | None = Field(
        None,
        description="Check a judge's agreement with people's labels at every logged step (review_dir, threshold, "
        "min_items): judge/agreement* columns in metrics.csv. null: off.",
    )

    def grading(self) -> GradingConfig:
        """The ``reward`` and ``sandbox`` sections as the one ``GradingConfig`` every grader takes."""
        sb = self.sandbox
        limits = Limits(cpu_time=sb.cpu_time, wall_time=sb.wall_time, memory=sb.memory_mb << 20)
        reward = self.reward
        return GradingConfig(mode=reward.mode, scan=reward.scan, call_rules=reward.call_rules, limits=limits)


class ConfigError(InputError):
    """A configuration file that cannot be used; the message says which field and why."""


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """Read and validate a YAML config; ``overrides`` (dotted keys) win over the file."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"config file {str(p)!r} does not exist (write one with `dojo train --print-config`)")
    try:
        text = read_user_text(p, "config file")
    except InputError as e:  # (a directory, not UTF-8: the CLI reports a ConfigError)
        raise ConfigError(str(e)) from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{p}: the top level must be a mapping of sections (tasks:, grpo:, ...), got {type(data).__name__}"
        )
    return build_config(data, overrides, origin=str(p))


def build_config(data: dict[str, Any], overrides: dict[str, Any] | None = None, origin: str = "config") -> TrainConfig:
    merged: dict[str, Any] = dict(data)
    for dotted, value in (overrides or {}).items():
        node = merged
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{origin}: cannot set {dotted}: {key} is not a section")
        node[leaf] = value
    try:
        return TrainConfig.model_validate(merged)
    except ValidationError as e:
        problems = [f"  {p}" for p in field_problems(e, "(top level)")]
        lines = [f"{origin}: {e.error_count()} invalid field(s):", *problems]
        raise ConfigError("\n".join(lines)) from None


def default_yaml() -> str:
    """The embedded default as YAML, with each field's description as a comment."""
    return "\n".join(_yaml_lines(TrainConfig(), 0)) + "\n"


def _yaml_lines(model: BaseModel, indent: int) -> list[str]:
    pad = "  " * indent
    lines: list[str] = []
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if field.description:
            lines.append(f"{pad}# {field.description}")
        if isinstance(value, BaseModel):
            lines.append(f"{pad}{name}:")
            lines.extend(_yaml_lines(value, indent + 1))
        else:
            plain = list(value) if isinstance(value, tuple) else str(value) if isinstance(value, Path) else value
            dumped = yaml.safe_dump({name: plain}, default_flow_style=True, width=1000).strip()
            lines.append(f"{pad}{dumped.removeprefix('{').removesuffix('}')}")
    return lines

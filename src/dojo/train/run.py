"""``dojo train``: tasks → episodes in the sandbox → rewards → a policy update, on one machine.

The run, in order (each phase is skipped on ``--resume`` when its output is already there):

1. tasks: the training set and a held-out set that shares no prompt with it (``dojo.train.data``);
2. the start model: dojo's tiny model built locally, or a local Hugging Face directory;
3. warm start: supervised fine-tuning on demonstrations through TRL's ``SFTTrainer``;
4. held-out evaluation of the warm-started model ("before");
5. GRPO through TRL's ``GRPOTrainer`` (``DojoGRPOTrainer``: curriculum, dynamic sampling,
   infrastructure failures masked). Each step's completions are dojo episodes (``DojoRollout``: the
   rollout scheduler and episode runner, in the ``episode`` mode of the config, sampled from the
   trainer's own model or a served copy of it), graded by dojo's graders in the sandbox; the same
   ``Episode`` records go to the trajectory store and, as token ids, to the loss. Checkpoints
   every ``output.save_every`` steps and on Ctrl-C, metrics in CSV and TensorBoard;
6. held-out evaluation of the final model ("after") and the report (Markdown, JSON, PNG).

Layout of ``output.dir``: ``config.yaml``, ``model-init/``, ``warm-start/``, ``grpo/checkpoint-N/``,
``final/``, ``trajectories/``, ``metrics.csv``, ``tensorboard/``, ``eval-before.json``,
``eval-after.json``, ``report.md``, ``report.json``, ``reward_curve.png``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import random
import shutil
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from rich.console import Console

from dojo.cluster.connect import check_address
from dojo.errors import InputError, field_problems
from dojo.integrations.trl_rollout import DojoRollout, GroupHook
from dojo.rollout.mirror import mirror_dir
from dojo.rollout.store import TrajectoryStore, open_url
from dojo.tasks.curriculum import CurriculumSampler
from dojo.tasks.model import Task
from dojo.train.config import TrainConfig
from dojo.train.data import demonstrations, fix_candidates, fix_demonstration, split_tasks
from dojo.train.evaluate import EvalResult, evaluate
from dojo.train.report import write_report
from dojo.user_files import read_user_text


class RunDirError(InputError):
    """The output directory cannot be used as asked (exists without --resume, or nothing to resume)."""


class TrainResult(BaseModel):
    output_dir: str
    steps: int
    before: EvalResult
    after: EvalResult
    wall_seconds: float
    interrupted: bool = False


def _quiet_libraries() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")  # a local run reports to nobody (nor starts a thread to)
    warnings.filterwarnings("ignore", module="trl")
    warnings.filterwarnings("ignore", module="transformers")
    warnings.filterwarnings("ignore", module="torch")
    for name in ("transformers", "trl", "accelerate", "datasets"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from datasets.utils import logging as ds_logging
    from transformers.utils import logging as hf_logging

    ds_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]


def prepare_output(config: TrainConfig, resume: bool) -> Path:
    """``check_output``, then ``write_output``: the run's directory, ready."""
    out = check_output(config, resume)
    write_output(config, out, resume)
    return out


def _fields(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A config's values by dotted name (``grpo.steps``), as ``--set`` spells them."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(_fields(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def check_output(config: TrainConfig, resume: bool) -> Path:
    """The run's directory, if the run can use it as asked (a RunDirError says why not); nothing is
    written (a typo in policy.model had left a directory whose config.yaml refused every later start)."""
    out = Path(config.output.dir)
    if config.output.mirror:
        open_url(config.output.mirror)  # a missing bucket is a clear error now, not after the first checkpoint
    saved = out / "config.yaml"
    if resume:
        if not saved.is_file():
            raise RunDirError(f"nothing to resume in {str(out)!r}: no config.yaml there (start a run without --resume)")
        try:
            previous = TrainConfig.model_validate(yaml.safe_load(read_user_text(saved, "the run's config")))
        except (yaml.YAMLError, ValidationError) as e:
            detail = f"{e.error_count()} field(s) wrong, first {field_problems(e)[0]}" if isinstance(
                e, ValidationError) else str(e).splitlines()[0]  # fmt: skip
            raise RunDirError(
                f"{saved} is damaged ({detail}): fix it, or start a new run in another output.dir"
            ) from None
        before, now = _fields(previous.model_dump(exclude={"output"})), _fields(config.model_dump(exclude={"output"}))
        if differ := [f"{k} {before.get(k)!r} (now {now.get(k)!r})" for k in sorted(before.keys() | now.keys())
                      if before.get(k) != now.get(k)]:  # fmt: skip
            more = f" and {len(differ) - 5} more" if len(differ) > 5 else ""
            raise RunDirError(
                f"{saved} differs from the config given: {', '.join(differ[:5])}{more}; resume with the run's own "
                f"config (dojo train {saved} --resume) or the same --set options, or start a new run in another "
                "output.dir"
            )
        return out
    if out.exists() and not out.is_dir():
        raise RunDirError(f"output.dir {str(out)!r} is a file: give a directory (new, or empty)")
    if out.exists() and any(out.iterdir()):
        raise RunDirError(
            f"output directory {str(out)!r} is not empty: pass --resume to continue that run, or pick another"
        )
    if config.policy.model != "tiny":
        given_model(config)
    return out


def given_model(config: TrainConfig) -> Path:
    """``policy.model``'s directory; a RunDirError where it holds no saved model (nothing is downloaded)."""
    path = Path(config.policy.model)
    if not (path / "config.json").is_file():
        raise RunDirError(
            f"policy.model {config.policy.model!r} is neither `tiny` nor a local Hugging Face model directory "
            "(with config.json); nothing is downloaded"
        )
    return path


def write_output(config: TrainConfig, out: Path, resume: bool) -> None:
    """Make a new run's directory and write its config.yaml (a resumed run's is kept)."""
    if not resume:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.yaml").write_text(yaml.safe_dump(json.loads(config.model_dump_json()), sort_keys=False))


def _start_model(config: TrainConfig, out: Path) -> Path:
    if config.policy.model == "tiny":
        from dojo.agent.tiny_model import build_tiny_model

        path = out / "model-init"
        if not (path / "config.json").is_file():
            spec = config.policy.tiny.model_copy(update={"seed": config.policy.tiny.seed + config.seed})
            build_tiny_model(path, spec)
        return path
    return given_model(config)


def load_policy(path: Path) -> tuple[Any, Any]:
    """A saved model and its tokenizer (left padding, for generation), from local files only."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype="float32")
    return model, tokenizer


def split_for_warm_start(train_tasks: list[Task], config: TrainConfig) -> tuple[list[Task], list[Task]]:
    """``(warm-start tasks, GRPO tasks)``: disjoint unless ``warm_start.share`` is 1 or there is no
    warm start. A prompt GRPO trains on is then one the supervised phase never showed, so a rise in
    GRPO's reward is a skill, not a recalled answer."""
    share = config.warm_start.share
    if config.warm_start.steps == 0 or share >= 1.0 or len(train_tasks) < 2:
        return train_tasks, train_tasks
    cut = min(len(train_tasks) - 1, max(1, round(len(train_tasks) * share)))
    return train_tasks[:cut], train_tasks[cut:]


def sft_arguments(config: TrainConfig, work_dir: Path) -> Any:
    """TRL's ``SFTConfig`` for the warm start: CPU, float32, cosine schedule, no checkpoints;
    the loss covers the prompt too unless ``warm_start.prompt_loss`` is off."""
    from trl.trainer.sft_config import SFTConfig

    ws = config.warm_start
    return SFTConfig(
        output_dir=str(work_dir),
        max_steps=ws.steps,
        per_device_train_batch_size=ws.batch_size,
        learning_rate=ws.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=min(20, ws.steps // 10),
        logging_steps=max(1, ws.steps // 10),
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        bf16=False,
        fp16=False,
        use_cpu=True,
        seed=config.seed,
        completion_only_loss=not ws.prompt_loss,
        dataloader_num_workers=0,
        max_length=1024,
        gradient_checkpointing=False,  # TRL's default recomputes activations: a third more work for a model this small
    )


def _warm_start(config: TrainConfig, start: Path, train: list[Task], out: Path) -> Path:
    done = out / "warm-start"
    if config.warm_start.steps == 0:
        return start
    if (done / "config.json").is_file():
        return done
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl.trainer.sft_trainer import SFTTrainer

    ws = config.warm_start
    model, tokenizer = load_policy(start)
    rows = demonstrations(train, ws.demonstrations, config.seed, ws.correct_share)
    if ws.fix_share > 0 and config.episode.mode == "feedback":
        rows += _fix_rows(config, fix_candidates(train, ws.demonstrations, config.seed, ws.fix_share), tokenizer)
        random.Random(config.seed).shuffle(rows)
    args = sft_arguments(config, out / "warm-start-work")
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    model.save_pretrained(done)
    tokenizer.save_pretrained(done)
    shutil.rmtree(out / "warm-start-work", ignore_errors=True)
    return done


def episode_rollout(
    config: TrainConfig, tasks: list[Task], *, on_groups: GroupHook | None = None, served: bool = False
) -> DojoRollout:
    """The run's episodes (mode, turns, grading, sandbox) on ``tasks``: plain-text prompts, as the
    warm start trains on; ``served``: sampled by ``policy.server``, with the weights pushed each step."""
    policy = weights = None
    servers = config.policy.servers
    if served and servers:
        from dojo.agent.policy import OpenAIPolicy
        from dojo.agent.policy_pool import PolicyPool
        from dojo.agent.weight_sync import ServedWeights

        clients = [OpenAIPolicy(url) for url in servers]
        policy = clients[0] if len(clients) == 1 else PolicyPool(clients)
        weights = ServedWeights(servers, Path(config.output.dir) / "policy-sync")
    return DojoRollout(
        tasks,
        mode=config.episode.mode,
        max_turns=config.episode.max_turns,
        grading=config.grading(),
        pool_size=config.sandbox.pool_size,
        ray=config.sandbox.ray,
        prompt_format="text",
        on_groups=on_groups,
        policy=policy,
        weights=weights,
    )


def _fix_rows(config: TrainConfig, pairs: list[tuple[Task, str]], tokenizer: Any) -> list[dict[str, str]]:
    """Two-reply demonstrations: each wrong reply's real feedback comes from the sandbox, through
    the same feedback step the episodes take (a reply that passes the visible tests anyway is left out)."""
    from dojo.agent.episode import EpisodeConfig
    from dojo.agent.feedback import feedback_step
    from dojo.agent.tools import Toolbox
    from dojo.cluster import sandbox_for

    limits = config.grading().limits
    chars = EpisodeConfig().max_observation_chars

    async def observe() -> list[dict[str, str] | None]:
        async with sandbox_for(config.sandbox.ray, config.sandbox.pool_size) as sandbox:
            boxes = [Toolbox(t, sandbox, limits=limits, max_observation_chars=chars) for t, _ in pairs]
            steps = await asyncio.gather(
                *(feedback_step(box, wrong, last_turn=False) for box, (_, wrong) in zip(boxes, pairs, strict=True))
            )
        return [step.message for step in steps]

    messages = asyncio.run(observe())
    eos = tokenizer.eos_token or ""
    return [fix_demonstration(t, wrong, m, eos) for (t, wrong), m in zip(pairs, messages, strict=True) if m is not None]


def _eval(config: TrainConfig, path: Path, held: list[Task], rollout: DojoRollout, file: Path) -> EvalResult:
    if file.is_file():
        return EvalResult.model_validate_json(file.read_text())
    model, tokenizer = load_policy(path)
    result = _eval_now(config, held, rollout, model, tokenizer)
    file.write_text(result.model_dump_json(indent=2))
    return result


def _eval_now(config: TrainConfig, held: list[Task], rollout: DojoRollout, model: Any, tokenizer: Any) -> EvalResult:
    """Held-out evaluation of ``model`` (also the one being trained, for ``eval.every``); leaves it
    in training mode."""
    try:
        return evaluate(
            model,
            tokenizer,
            held,
            rollout,
            samples=config.eval.samples,
            temperature=config.grpo.temperature,
            max_tokens=config.grpo.max_completion_tokens,
        )
    finally:
        model.train()


def _checkpoint_step(checkpoint: Path) -> int:
    return int(checkpoint.name.split("-")[1])  # TRL's checkpoint-N


def _latest_checkpoint(grpo_dir: Path) -> Path | None:
    ckpts = [p for p in grpo_dir.glob("checkpoint-*") if p.is_dir() and (p / "trainer_state.json").is_file()]
    return max(ckpts, key=_checkpoint_step) if ckpts else None


def train(
    config: TrainConfig, *, resume: bool = False, console: Console | None = None, quiet: bool = False
) -> TrainResult:
    """Run (or resume) a training run; returns the held-out results before and after GRPO."""
    import torch

    console = console or Console(stderr=True)

    def say(message: str) -> None:
        if not quiet:
            console.print(message)

    started = time.monotonic()
    if config.sandbox.ray:  # (a cluster that does not answer had failed after the warm start, with a traceback)
        check_address(config.sandbox.ray)
    out = check_output(config, resume)
    train_tasks, held = split_tasks(config.tasks, config.seed)  # (a bad source fails before the directory is made)
    write_output(config, out, resume)
    _quiet_libraries()
    torch.set_num_threads(config.threads)
    random.seed(config.seed)
    torch.manual_seed(config.seed)

    say(f"[bold]dojo train[/] → {out}  ({len(train_tasks)} training tasks, {len(held)} held out)")
    eval_rollout = episode_rollout(config, held)
    try:
        start = _start_model(config, out)
        if config.warm_start.steps and not (out / "warm-start" / "config.json").is_file():
            say(f"warm start: {config.warm_start.steps} supervised steps ({config.warm_start.demonstrations})")
        sft_tasks, rl_tasks = split_for_warm_start(train_tasks, config)
        warm = _warm_start(config, start, sft_tasks, out)
        before = _eval(config, warm, held, eval_rollout, out / "eval-before.json")
        say(f"held-out before GRPO: reward {before.mean_reward:.3f}, greedy pass {before.greedy_pass:.3f}")
        periodic = functools.partial(_eval_now, config, held, eval_rollout)
        steps, interrupted = _grpo(config, warm, rl_tasks, out, quiet, periodic)
        if interrupted:
            say(f"[yellow]interrupted at step {steps}: checkpoint saved; continue with --resume[/]")
            after = before  # no final model yet
        else:
            after = _eval(config, out / "final", held, eval_rollout, out / "eval-after.json")
    finally:
        eval_rollout.close()
    result = TrainResult(
        output_dir=str(out), steps=steps, before=before, after=after, wall_seconds=time.monotonic() - started,
        interrupted=interrupted,
    )  # fmt: skip
    if not interrupted:
        write_report(out, config, result.before, result.after, steps)
    if config.output.mirror:
        mirror_dir(out, config.output.mirror)
    return result


def _grpo(
    config: TrainConfig,
    warm: Path,
    train_tasks: list[Task],
    out: Path,
    quiet: bool,
    periodic: Callable[[Any, Any], EvalResult] | None = None,
) -> tuple[int, bool]:
    """GRPO until ``grpo.steps`` (from the latest checkpoint when there is one); returns the step
    reached and whether Ctrl-C stopped it."""
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl.trainer.grpo_config import GRPOConfig

    from dojo.integrations.trl_rewards import task_rows
    from dojo.integrations.trl_rollout import episode_reward
    from dojo.integrations.trl_trainer import CurriculumBatches, DojoGRPOTrainer, index_tasks, tasks_per_step
    from dojo.rewards.agreement import AgreementMonitor
    from dojo.train.callbacks import CURRICULUM_FILE, DojoCallback, StepRecorder, drop_newer_shards

    g = config.grpo
    final = out / "final"
    grpo_dir = out / "grpo"
    if (final / "config.json").is_file():
        state = json.loads((final / "dojo_state.json").read_text())
        return int(state["steps"]), False
    cur = config.curriculum
    curriculum = CurriculumSampler(
        train_tasks, seed=config.seed, level=cur.start_level, promote_at=cur.promote_at, demote_at=cur.demote_at,
        width=cur.width if cur.enabled else 1e6,
    )  # fmt: skip
    checkpoint = _latest_checkpoint(grpo_dir)
    store = TrajectoryStore(str(out / "trajectories"), run_id=f"seed{config.seed}-{int(time.time())}")
    if checkpoint is not None and (checkpoint / CURRICULUM_FILE).is_file():
        curriculum.load_state_dict(json.loads((checkpoint / CURRICULUM_FILE).read_text()))
    drop_newer_shards(store, _checkpoint_step(checkpoint) if checkpoint is not None else 0)
    recorder = StepRecorder(curriculum)
    rollout = episode_rollout(config, train_tasks, on_groups=recorder.record, served=True)
    per_step = tasks_per_step(g.prompts_per_step, g.oversample)
    args = GRPOConfig(
        output_dir=str(grpo_dir),
        max_steps=g.steps,
        per_device_train_batch_size=per_step * g.group_size,
        num_generations=g.group_size,
        learning_rate=g.learning_rate,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=g.warmup_steps,
        temperature=g.temperature,
        top_k=0,
        max_completion_length=g.max_completion_tokens,
        beta=g.beta,
        epsilon=g.epsilon,
        loss_type=g.loss_type,
        bf16=False,
        fp16=False,
        use_cpu=True,
        seed=config.seed,
        logging_steps=1,
        save_strategy="steps",
        save_steps=config.output.save_every,
        save_total_limit=config.output.keep_checkpoints,
        report_to=["tensorboard"] if config.output.tensorboard else [],
        disable_tqdm=True,
        ignore_data_skip=True,  # the curriculum's state comes back from the checkpoint instead
        dataloader_num_workers=0,
        shuffle_dataset=False,
        gradient_checkpointing=False,
    )
    model, tokenizer = load_policy(warm)
    dataset = Dataset.from_list(task_rows(train_tasks))
    sampler = CurriculumBatches(curriculum, index_tasks(train_tasks), per_step, g.group_size)
    ja = config.judge_agreement
    agreement = AgreementMonitor(ja.review_dir, threshold=ja.threshold, min_items=ja.min_items) if ja else None
    callback = DojoCallback(out, recorder, store, g.steps, quiet, periodic_eval=periodic, eval_every=config.eval.every,
                            mirror=config.output.mirror, agreement=agreement)  # fmt: skip
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(out / "tensorboard")  # read by the TensorBoard callback
    trainer = DojoGRPOTrainer(
        model=model,
        reward_funcs=episode_reward,
        rollout_func=rollout,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[callback],
        sampler=sampler,
        keep_groups=g.prompts_per_step,
        dojo_metrics=lambda: {**recorder.take_metrics(), "curriculum_level": curriculum.level},
    )
    trainer.remove_callback(PrinterCallback)
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    finally:
        rollout.close()
    steps = trainer.state.global_step
    if callback.interrupted and steps < g.steps:
        return steps, True
    trainer.save_model(str(final))
    tokenizer.save_pretrained(final)
    (final / "dojo_state.json").write_text(json.dumps({"steps": steps}))
    return steps, False

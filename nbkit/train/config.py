"""What a training run is told and what it keeps: ``TrainConfig``, ``TrainState``, ``TrainResult`` (plain dataclasses)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nbkit.errors import ConfigError

#: How an error or warning about resuming tells the user to start over, in each API they may be using.
START_FRESH = ("a new output_dir, or resume=False (TrainConfig(resume=False) for the Loop; in the notebooks' "
               "recipes FinetuneConfig/PretrainConfig.for_scale(..., resume=False), or cfg.replace(resume=False))")

#: The help of the recipes' ``skip_examples`` field (notebook parameter, PretrainConfig/FinetuneConfig field, job flag).
SKIP_EXAMPLES_HELP = ("indices in the training dataset left out of their batches, e.g. those a non-finite loss "
                      "names (the others keep their order; the run's folder stays the same, so a resume finds it; "
                      "counted in metrics.json as skipped_examples)")


def skip_examples_fix(indices: list[int]) -> str:
    """How to leave ``indices`` out, in each API a run may come from: the Loop's ``TrainConfig``, a notebook
    parameters cell's ``overrides`` (a recipe config field), a job flag."""
    shown = list(indices)
    return (f"TrainConfig(skip_examples={shown}) for the Loop; in notebooks 02/03/06/07 the parameters cell's "
            f"overrides = {{'skip_examples': {shown}}} (a PretrainConfig/FinetuneConfig field); in a job "
            f"--skip-examples {' '.join(map(str, shown))}")


#: where a run's scalars go besides ``metrics.json``: TensorBoard event files, or nowhere
REPORT_TO = ("tensorboard", "none")


@dataclass
class TrainConfig:
    """Every knob of a run. Steps are optimizer steps; a batch is ``batch_size`` sequences (per process).

    Global batch = ``batch_size * grad_accum_steps * world_size``. ``log_every``, ``eval_every``,
    ``checkpoint_every`` count steps; checkpoints are also written at ``keep_steps``, and each save keeps
    the newest ``keep_last`` (0: all) plus those. A fresh run sets an earlier run's checkpoints aside and keeps the
    newest ``keep_previous`` such sets (0: all). ``compile``: False, True (inductor) or a backend name;
    it pads to a multiple of ``pad_to_multiple_of`` (default 64) and drops the last partial batch (static
    shapes). ``group_by_length``: similar lengths share a batch (``nbkit.train.ddp.sampler``).
    ``class_weights`` (classification): None, ``"balanced"`` or one weight per class (``nbkit.train.loss``;
    evaluation stays unweighted). ``eval_batches``: None evaluates everything. ``identity``: what the run's data
    means that must not change across a resume (``{"tokenizer": sha256}``); a resume under another is refused.
    ``fused_loss``: a causal LM with a plain linear head, trained eagerly in one process, computes its output
    layer and loss chunk by chunk (no (B, T, V) logits); False: full logits.

    ``skip_examples``: indices in ``train_data`` left out of their batches (the rest keeps its order, so a resume
    stays exact), e.g. the examples a non-finite loss names; counted in the summary (``skipped_examples``).

    Watching and stopping a run: with ``output_dir``, a checkpoint is also written when ``checkpoint_minutes``
    passed since the last save (None: by steps only), and a Ctrl-C saves one at the next step boundary.
    ``progress_every_s``: a plain progress line every that many seconds (None: none). ``report_to``:
    ``"tensorboard"`` writes event files to ``output_dir/tensorboard``, ``"none"`` not.

    Raises:
        ConfigError: a count < 1, ``keep_steps`` outside 1..max_steps, checkpoints without ``output_dir``,
            ``checkpoint_minutes``/``progress_every_s`` <= 0, an unknown ``report_to``.
    """

    max_steps: int
    batch_size: int
    grad_accum_steps: int = 1
    lr: float = 5e-4
    weight_decay: float = 0.01
    warmup_ratio: float = 0.06
    scheduler: str = "linear"
    max_grad_norm: float | None = 1.0
    precision: str = "auto"
    eval_every: int | None = None
    eval_batches: int | None = None
    checkpoint_every: int | None = None
    keep_last: int = 2
    keep_previous: int = 1
    skip_examples: tuple[int, ...] = ()
    keep_steps: tuple[int, ...] = ()
    output_dir: str | Path | None = None
    seed: int = 0
    compile: bool | str = False
    num_workers: int = 0
    pin_memory: bool | None = None
    log_every: int = 10
    resume: bool = True
    pad_to_multiple_of: int | None = None
    group_by_length: bool = False
    progress: bool = True
    class_weights: str | list[float] | None = None
    checkpoint_minutes: float | None = 10.0
    progress_every_s: float | None = 30.0
    report_to: str = "none"
    identity: dict | None = None
    fused_loss: bool = True

    def __post_init__(self):
        for name in ("max_steps", "batch_size", "grad_accum_steps", "log_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1.")
        if (self.checkpoint_every or self.keep_steps) and self.output_dir is None:
            what = "checkpoint_every" if self.checkpoint_every else "keep_steps"
            raise ConfigError(f"{what} needs output_dir: set TrainConfig(output_dir=...).")
        if self.keep_previous < 0:
            raise ConfigError(f"keep_previous={self.keep_previous} must be >= 0 (0: keep every earlier run's "
                              "checkpoints).")
        for name in ("checkpoint_minutes", "progress_every_s"):
            if getattr(self, name) is not None and not getattr(self, name) > 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be > 0 (None: off).")
        if self.report_to not in REPORT_TO:
            raise ConfigError(f"report_to={self.report_to!r}: use one of {', '.join(map(repr, REPORT_TO))}.")
        self.keep_steps = tuple(sorted({int(s) for s in self.keep_steps}))
        self.skip_examples = tuple(sorted({int(i) for i in self.skip_examples}))
        bad = [s for s in self.keep_steps if not 1 <= s <= self.max_steps]
        if bad:
            raise ConfigError(f"keep_steps {bad} outside 1..{self.max_steps} (max_steps): raise max_steps or "
                              "drop those steps")


@dataclass
class TrainState:
    """Where the run is: optimizer ``step``, data ``epoch`` and position, counters.

    Position in the epoch = ``epoch_start + batch_in_epoch * batch_size * world_size``
    global samples (``epoch_start`` is set on resume, under any world size).
    """

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    epoch_start: int = 0
    skipped_steps: int = 0
    consecutive_nonfinite: int = 0
    train_tokens: int = 0
    skipped_examples: int = 0
    history: list = field(default_factory=list)


@dataclass
class TrainResult:
    """``history``: every log/eval dict in order; ``metrics``: final summary; ``checkpoint``: last saved dir."""

    history: list
    metrics: dict
    checkpoint: Path | None

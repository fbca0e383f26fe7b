"""The nbkit training loop: readable, exact to resume, hard to corrupt.

One optimizer step (``grad_accum_steps`` = k micro-batches)::

    n = label tokens (labels != -100) in all k micro-batches  # counted on CPU, no GPU sync
    for each micro-batch:  loss_sum = CE(logits, labels, reduction="sum")
                           backward(loss_sum / n)              # = one batch of k x the size
    unscale (fp16) -> clip grad norm -> one host sync (loss, grad norm)
    non-finite? skip the update and count it; else optimizer step
    scheduler step; log / eval / checkpoint on their intervals

DDP slots in at four small methods: ``_make_sampler``, ``_backward_context``,
``_reduce`` and ``_is_main``. Views subscribe via callbacks (see
``nbkit.callbacks.Callback``); the loop knows nothing about Jupyter.
"""
from __future__ import annotations

import contextlib
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from nbkit import checkpoint as ckpt
from nbkit.errors import ConfigError, NonFiniteLossError
from nbkit.flops import bert_flops_per_token, mfu, peak_tflops
from nbkit.optim import build_optimizer, build_scheduler
from nbkit.precision import choose_precision, matmul_precision_name
from nbkit.batching import ResumableSampler, micro_batches, prepare_batch


@dataclass
class TrainConfig:
    """Every knob of a run. Steps are optimizer steps; a batch is ``batch_size`` sequences.

    Effective batch = ``batch_size * grad_accum_steps``. ``compile`` is False,
    True (inductor) or a ``torch.compile`` backend name; with it, sequences are
    padded to a multiple of ``pad_to_multiple_of`` (64 when unset) and the last
    partial batch is dropped, so shapes stay static. ``log_every``,
    ``eval_every`` and ``checkpoint_every`` count optimizer steps.
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
    output_dir: str | Path | None = None
    seed: int = 0
    compile: bool | str = False
    num_workers: int = 0
    pin_memory: bool | None = None
    log_every: int = 10
    max_consecutive_nonfinite: int = 5
    resume: bool = True
    pad_to_multiple_of: int | None = None
    progress: bool = True

    def __post_init__(self):
        for name in ("max_steps", "batch_size", "grad_accum_steps", "log_every", "max_consecutive_nonfinite"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1.")
        if self.checkpoint_every and self.output_dir is None:
            raise ConfigError("checkpoint_every needs output_dir: set TrainConfig(output_dir=...).")


@dataclass
class TrainState:
    """Where the run is: optimizer ``step``, data ``epoch`` and ``batch_in_epoch``, counters."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    skipped_steps: int = 0
    consecutive_nonfinite: int = 0
    train_tokens: int = 0
    history: list = field(default_factory=list)


@dataclass
class TrainResult:
    """``history``: every log/eval dict in order; ``metrics``: final summary; ``checkpoint``: last saved dir."""

    history: list
    metrics: dict
    checkpoint: Path | None


def token_loss_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy summed over label tokens (labels != -100).

    logits: (B, T, V) for MLM or (B, C) for classification; labels: (B, T) or (B,).
    Returns a scalar (fp32 under autocast, which runs cross_entropy in fp32).
    """
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=-100, reduction="sum")


class Loop:
    """Train ``model`` on ``train_data`` with ``config``; see the module docstring.

    model: a Hugging Face model whose output has ``.logits`` (BertForMaskedLM,
        BertForSequenceClassification, ...); labels are never passed to it.
    train_data / eval_data: map-style datasets; ``collate_fn`` turns a list of
        examples into a dict of tensors with ``labels`` (-100 = ignored).
    callbacks: objects with any of ``on_train_begin(loop)``, ``on_log(loop, logs)``,
        ``on_evaluate(loop, metrics)``, ``on_save(loop, path)``,
        ``on_step_end(loop)``, ``on_train_end(loop, result)``.
    device: default CUDA when available, else CPU.
    """

    def __init__(self, model, config: TrainConfig, train_data, eval_data=None, collate_fn=None,
                 callbacks=(), device=None):
        self.config, self.train_data, self.eval_data = config, train_data, eval_data
        self.collate_fn, self.callbacks = collate_fn, list(callbacks)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model = model.to(self.device)
        self.precision = choose_precision(config.precision, self.device)
        self.optimizer = build_optimizer(self.model, config.lr, config.weight_decay)
        self.scheduler = build_scheduler(self.optimizer, config.scheduler, config.max_steps, config.warmup_ratio)
        self.scaler = self.precision.make_scaler()
        self.sampler = self._make_sampler()
        self.state = TrainState()
        self.last_checkpoint: Path | None = None
        self.recompilations: int | None = None
        self._forward = self.model
        if config.compile:
            backend = config.compile if isinstance(config.compile, str) else "inductor"
            self._forward = torch.compile(self.model, backend=backend, dynamic=False)
        self._pad_multiple = config.pad_to_multiple_of or (64 if config.compile else None)
        self._is_bert = getattr(getattr(model, "config", None), "model_type", None) == "bert"
        peak_name = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else ""
        self._peak = peak_tflops(peak_name, matmul_precision_name(self.precision)) if peak_name else None

    # ----- points where DDP plugs in -----------------------------------------------------
    def _make_sampler(self):
        return ResumableSampler(len(self.train_data), seed=self.config.seed, shuffle=True)

    def _backward_context(self, micro: int, n_micro: int):
        return contextlib.nullcontext()  # DDP: model.no_sync() for micro < n_micro - 1

    def _reduce(self, values: torch.Tensor) -> torch.Tensor:
        # DDP: all_reduce(SUM). Also needed for n_label before the first backward (global token count;
        # then scale by world size, since DDP averages gradients over ranks).
        return values

    def _is_main(self) -> bool:
        return True  # DDP: rank == 0

    # ----- data --------------------------------------------------------------------------
    def _micro_batches(self):
        return micro_batches(self.train_data, self.sampler, self.state, self.config, self.collate_fn,
                             pin_memory=self.device.type == "cuda")

    def _prepare(self, batch: dict) -> dict:
        pad_id = getattr(getattr(self.model, "config", None), "pad_token_id", 0) or 0
        return prepare_batch(batch, self.device, self._pad_multiple, pad_id)

    # ----- one optimizer step ------------------------------------------------------------
    def _step(self, window: list[dict]) -> dict:
        n_label = sum(int((b["labels"] != -100).sum()) for b in window)  # CPU tensors: no device sync
        loss_sum = torch.zeros((), device=self.device)
        tokens, seq_flops = 0, 0.0
        for i, raw in enumerate(window):
            batch = self._prepare(raw)
            labels = batch.pop("labels")
            with self._backward_context(i, len(window)):
                with self.precision.autocast():
                    logits = self._forward(**batch).logits                  # (B, T, V) or (B, C)
                    loss = token_loss_sum(logits, labels)                    # scalar, fp32
                scaled = loss / max(n_label, 1)
                (self.scaler.scale(scaled) if self.scaler else scaled).backward()
            loss_sum += loss.detach()
            ids = batch["input_ids"]                                         # (B, T)
            tokens += ids.numel()
            if self._is_bert:
                task = "mlm" if labels.dim() == 2 else "encoder"
                seq_flops += ids.numel() * bert_flops_per_token(self.model.config, ids.shape[1], task)
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        max_norm = self.config.max_grad_norm or float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        loss_v, norm_v = torch.stack([self._reduce(loss_sum), grad_norm.float()]).tolist()  # the one sync/step
        lr = self.optimizer.param_groups[0]["lr"]
        finite = math.isfinite(loss_v) and (self.scaler is not None or math.isfinite(norm_v))
        if finite:
            (self.scaler.step(self.optimizer) if self.scaler else self.optimizer.step())
            self.state.consecutive_nonfinite = 0
        else:
            self.state.skipped_steps += 1
            self.state.consecutive_nonfinite += 1
        if self.scaler:
            self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        with warnings.catch_warnings():  # a skipped first step makes torch warn; the schedule stays on step
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
            self.scheduler.step()
        return {"loss_sum": loss_v if finite else 0.0, "n_label": n_label if finite else 0, "finite": finite,
                "grad_norm": norm_v, "lr": lr, "samples": sum(len(b["labels"]) for b in window),
                "tokens": tokens, "flops": seq_flops}

    def _check_nonfinite(self) -> None:
        st, limit = self.state, self.config.max_consecutive_nonfinite
        if st.consecutive_nonfinite >= limit:
            raise NonFiniteLossError(
                f"{limit} optimizer steps in a row had a non-finite loss or gradient (step {st.step}, "
                f"{st.skipped_steps} skipped in all). Lower lr (now {self.config.lr}), raise warmup_ratio, "
                f"keep max_grad_norm set, use precision='bf16' or 'fp32' instead of fp16, and check the data "
                f"for empty or corrupt examples; then resume from the last checkpoint.")

    # ----- the run -----------------------------------------------------------------------
    def fit(self) -> TrainResult:
        """Train to ``max_steps`` (resuming from ``output_dir`` when possible) and return a TrainResult.

        Raises ``NonFiniteLossError`` after ``max_consecutive_nonfinite``
        skipped steps in a row, ``DataError`` when the data yields no batch.
        """
        from tqdm.auto import tqdm

        cfg, st = self.config, self.state
        if cfg.resume and cfg.output_dir is not None:
            self._resume()
        self._emit("on_train_begin")
        bar = tqdm(total=cfg.max_steps, initial=st.step, disable=not (cfg.progress and self._is_main()),
                   desc="train", unit="step")
        batches = self._micro_batches()
        self._win, self._run = dict.fromkeys(_SUMS, 0), dict.fromkeys(_SUMS, 0)  # this log window, whole run
        frames0 = None
        t0 = time.perf_counter()
        self.model.train()
        while st.step < cfg.max_steps:
            out = self._step([next(batches) for _ in range(cfg.grad_accum_steps)])
            st.step += 1
            st.train_tokens += out["tokens"]
            for k in _SUMS[:-1]:
                self._win[k] += out[k]
            self._check_nonfinite()
            if frames0 is None and cfg.compile:
                frames0 = _dynamo_frames()  # after the first step's compile
            bar.update(1)
            self._emit("on_step_end")
            if st.step % cfg.log_every == 0 or st.step == cfg.max_steps:
                logs = self._log(out, time.perf_counter() - t0)
                bar.set_postfix(loss=f"{logs['loss']:.4f}", lr=f"{logs['lr']:.2e}")
                t0 = time.perf_counter()
            if self.eval_data is not None and cfg.eval_every and st.step % cfg.eval_every == 0:
                self._record_eval(self.evaluate())
                t0 = time.perf_counter()  # keep eval time out of throughput
            if cfg.checkpoint_every and st.step % cfg.checkpoint_every == 0:
                self.save()
                t0 = time.perf_counter()
        bar.close()
        if frames0 is not None:
            self.recompilations = _dynamo_frames() - frames0
        if self.eval_data is not None and not (st.history and "eval_loss" in st.history[-1]
                                               and st.history[-1]["step"] == st.step):
            self._record_eval(self.evaluate())
        if cfg.output_dir is not None and (self.last_checkpoint is None
                                           or not self.last_checkpoint.name.endswith(f"{st.step:06d}")):
            self.save()
        result = TrainResult(history=list(st.history), metrics=self._summary(), checkpoint=self.last_checkpoint)
        self._emit("on_train_end", result)
        return result

    def _rates(self, sums: dict) -> dict:
        dt = sums["time"]
        return {"samples_per_s": sums["samples"] / dt if dt else None,
                "tokens_per_s": sums["tokens"] / dt if dt else None,
                "mfu": mfu(sums["flops"] / dt, 1.0, self._peak) if dt and sums["flops"] else None}

    def _log(self, out: dict, dt: float) -> dict:
        st, win = self.state, self._win
        win["time"] = dt
        logs = {"step": st.step, "epoch": st.epoch + st.batch_in_epoch * self.config.batch_size / len(self.train_data),
                "loss": win["loss_sum"] / win["n_label"] if win["n_label"] else float("nan"),
                "lr": out["lr"], "grad_norm": out["grad_norm"], **self._rates(win),
                "elapsed_s": dt, "skipped_steps": st.skipped_steps}
        for k in _SUMS:
            self._run[k] += win[k]
        self._win = dict.fromkeys(_SUMS, 0)
        st.history.append(logs)
        self._emit("on_log", logs)
        return logs

    def _summary(self) -> dict:
        st = self.state
        losses = [h["loss"] for h in st.history if "loss" in h]
        evals = [h for h in st.history if "eval_loss" in h]
        return {"steps": st.step, "train_tokens": st.train_tokens, "skipped_steps": st.skipped_steps,
                "train_loss": losses[-1] if losses else None, "precision": self.precision.name,
                "device": str(self.device), **self._rates(self._run), "recompilations": self.recompilations,
                **({k: v for k, v in evals[-1].items() if k != "step"} if evals else {})}

    def _record_eval(self, metrics: dict) -> None:
        self.state.history.append({"step": self.state.step, **metrics})
        self._emit("on_evaluate", metrics)

    def evaluate(self, max_batches: int | None = None) -> dict:
        """Held-out metrics (see ``nbkit.loop_eval.evaluate``); never moves the training RNG."""
        from nbkit.loop_eval import evaluate

        return evaluate(self, max_batches)

    # ----- checkpoints -------------------------------------------------------------------
    def save(self) -> Path | None:
        """Write an atomic checkpoint of everything needed to resume exactly (main process only)."""
        if self.config.output_dir is None:
            raise ConfigError("save() needs a directory: set TrainConfig(output_dir=...).")
        if not self._is_main():
            return None
        state = ckpt.loop_state(self)
        self.last_checkpoint = ckpt.save_checkpoint(self.config.output_dir, self.state.step, self.model, state,
                                                    keep_last=self.config.keep_last)
        self._emit("on_save", self.last_checkpoint)
        return self.last_checkpoint

    def _resume(self) -> None:
        found = ckpt.load_latest(self.config.output_dir)
        if found is None:
            return
        ckpt.restore_loop(self, found)
        self.last_checkpoint = found.path
        print(f"resumed from {found.path} (step {self.state.step})")

    def _emit(self, event: str, *args) -> None:
        if not self._is_main():
            return
        for cb in self.callbacks:
            fn = getattr(cb, event, None)
            if fn is not None:
                fn(self, *args)


_SUMS = ("loss_sum", "n_label", "samples", "tokens", "flops", "time")  # summed per log window


def _dynamo_frames() -> int:
    """Frames dynamo has compiled so far (each recompilation adds one)."""
    from torch._dynamo.utils import counters

    return int(counters["frames"]["ok"])

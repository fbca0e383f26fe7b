"""The nbkit training loop: readable, exact to resume, hard to corrupt.

One optimizer step (``grad_accum_steps`` = k micro-batches)::

    n = label tokens (labels != -100) in all k micro-batches  # counted on CPU (+ summed over ranks)
    for each micro-batch:  loss_sum = CE(logits, labels, reduction="sum")
                           backward(loss_sum * W / n)          # = one batch of k x the size (W ranks)
    unscale (fp16) -> clip grad norm -> one host sync (loss, grad norm)
    non-finite loss? stop the run, naming the step; non-finite gradients? skip the update and count it
    scheduler step; log / eval / checkpoint on their intervals     # all but this line: Loop.train_step

A Ctrl-C (SIGINT) or a SIGTERM (``timeout``, SLURM, Kubernetes, ``docker stop``) while training is held until the
step ends: the loop saves a checkpoint there and raises :class:`TrainingInterrupted` (a ``KeyboardInterrupt``) saying
how to resume; a second signal stops at once.
Under torchrun (W > 1) the same code runs DDP: ``docs/distributed.md`` says what differs where.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import MutableMapping
from pathlib import Path

import torch

from nbkit.errors import ConfigError, DataError, NonFiniteLossError
from nbkit.models.causal import MODEL_TYPES as CAUSAL_TYPES
from nbkit.models.causal import fused_output_weight
from nbkit.models.flops import bert_batch_flops, causal_flops_per_token, mfu, peak_tflops
from nbkit.models.mlm_head import forward_logits, uses_sparse_head
from nbkit.train import checkpoint as ckpt
from nbkit.train import preflight, workers
from nbkit.train.batching import INDEX_KEY, SKIPPED_KEY, input_lengths, micro_batches, prepare_batch
from nbkit.train.callbacks import ProgressLine, TensorBoardLogger
from nbkit.train.config import TrainConfig, TrainResult, TrainState, skip_examples_fix
from nbkit.train.ddp import group as D
from nbkit.train.ddp.launcher_watch import watch_launcher
from nbkit.train.ddp.rendezvous import should_join
from nbkit.train.ddp.sampler import ResumableDistributedSampler
from nbkit.train.loss import class_weights, label_weight_sum, linear_cross_entropy_sum, token_loss_sum
from nbkit.train.optim import build_optimizer, build_scheduler
from nbkit.train.precision import choose_precision, matmul_precision_name
from nbkit.train.run_lock import RunLock


class Loop:
    """Train ``model`` on ``train_data`` with ``config``.

    model: a Hugging Face model whose output has ``.logits``; labels are never passed to it.
    train_data / eval_data: map-style datasets; ``collate_fn`` makes a dict of tensors with ``labels``
    (-100 = ignored). callbacks: objects with any of ``nbkit.train.callbacks.Callback``'s methods.
    device: default CUDA when available, else CPU (under torchrun ``cuda:LOCAL_RANK``).

    Building a Loop only checks and records (the model stays where it is); :meth:`setup` does the rest.
    Raises ``ConfigError`` (unusable device or output_dir, inherited torchrun variables) or ``DataError``
    (empty data) here. ``sparse_head``: MLM logits at label positions only; ``peak_tflops``: the MFU
    denominator (TFLOP/s at this precision; None off CUDA or unknown).
    """

    def __init__(self, model, config: TrainConfig, train_data, eval_data=None, collate_fn=None,
                 callbacks=(), device=None):
        self.config, self.train_data, self.eval_data = config, train_data, eval_data
        self.collate_fn, self.callbacks = collate_fn, list(callbacks)
        self.dist = D.DistInfo.from_env() if should_join() else D.DistInfo()  # setup() joins the group
        cuda = f"cuda:{self.dist.local_rank}" if self.dist.is_distributed else "cuda"
        self.device = torch.device(device or (cuda if torch.cuda.is_available() else "cpu"))
        preflight.check_device(self.device)            # each raises naming the fix, before any work
        preflight.check_output_dir(config.output_dir)
        preflight.check_not_empty(train_data, "train_data")
        if eval_data is not None:
            preflight.check_not_empty(eval_data, "eval_data")
        # the plain module: eval, clipping, checkpoints; setup() moves it to device. A peft (LoRA) model: the
        # transformers model it wraps, adapters inside, so a checkpoint is a complete from_pretrained folder
        self.model = model.get_base_model() if hasattr(model, "get_base_model") else model
        num_labels = getattr(getattr(model, "config", None), "num_labels", None)
        self.class_weights = class_weights(config.class_weights, train_data, num_labels)  # (C,) CPU, or None
        self.precision = choose_precision(config.precision, self.device)
        self.optimizer = build_optimizer(model, config.lr, config.weight_decay, device=self.device)
        self.scheduler = build_scheduler(self.optimizer, config.scheduler, config.max_steps, config.warmup_ratio)
        self.scaler = self.precision.make_scaler()
        # one global order per epoch (seed + epoch), rank r reads every W-th: checkpoints move between 1 and N ranks
        w = self.dist.world_size
        lengths = input_lengths(train_data) if config.group_by_length else None
        self.sampler = ResumableDistributedSampler(len(train_data), num_replicas=w, rank=self.dist.rank,
                                                   seed=config.seed, lengths=lengths, group_size=config.batch_size * w)
        self.state = TrainState()
        self.last_checkpoint: Path | None = None
        self.recompilations: int | None = None
        self._pad_multiple = config.pad_to_multiple_of or (64 if config.compile else None)
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        self._is_bert = model_type == "bert"
        self._is_causal = model_type in CAUSAL_TYPES
        # a *ForTokenClassification model: labels (B, T) of a few classes, scored by accuracy and macro-F1,
        # not MLM targets (no perplexity, no MLM-head FLOPs)
        self._per_token = type(model).__name__.endswith("ForTokenClassification")
        self.sparse_head = uses_sparse_head(model, config.compile)
        peak_name = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else ""
        self.peak_tflops = peak_tflops(peak_name, matmul_precision_name(self.precision)) if peak_name else None
        self._ready = self._eval_checked = False
        self.last_step: dict | None = None   # the latest train_step dict (callbacks read it)
        self._last_save_t = time.monotonic()

    def setup(self) -> None:
        """Ready this process to train, once (``fit``, ``evaluate``, ``train_step`` and ``save`` call it).

        Joins the process group under torchrun, seeds the global RNGs from ``config.seed``, moves the model to
        ``device`` (DDP-wrapped, compiled as configured) and adds the views the config asks for.

        Raises:
            ConfigError: ranks that do not meet in time, ``LOCAL_RANK`` without a GPU (named), or
                ``report_to="tensorboard"`` without the tensorboard package.
        """
        if self._ready:
            return
        if self.dist.is_distributed:
            self.dist = D.init_distributed()
        watch_launcher()  # also under torchrun --nproc-per-node=1: stop when the launcher dies
        D.seed_rank(self.config.seed, self.dist.rank)
        self.model.to(self.device)
        self._weight_dev = None if self.class_weights is None else self.class_weights.to(self.device)
        self._forward = self.model  # what training forwards through: DDP-wrapped, compiled
        if self.dist.is_distributed:
            self._forward = D.wrap_ddp(self.model, dataclasses.replace(self.dist, device=str(self.device)))
        if self.config.compile:
            backend = self.config.compile if isinstance(self.config.compile, str) else "inductor"
            self._forward = torch.compile(self._forward, backend=backend, dynamic=False)
        # a causal LM's output layer fused with its loss when training runs the plain module (eager, one process)
        plain = self._forward is self.model and self.class_weights is None
        self._fused_weight = fused_output_weight(self.model) if plain and self.config.fused_loss else None
        cfg = self.config
        if cfg.progress_every_s and not any(isinstance(cb, ProgressLine) for cb in self.callbacks):
            self.callbacks.append(ProgressLine(cfg.progress_every_s))
        if (cfg.report_to == "tensorboard" and cfg.output_dir is not None
                and not any(isinstance(cb, TensorBoardLogger) for cb in self.callbacks)):
            self.callbacks.append(TensorBoardLogger(Path(cfg.output_dir) / "tensorboard"))
        self._ready = True

    # ----- data --------------------------------------------------------------------------
    def batch_stream(self):
        """Endless collated micro-batches (CPU tensors) in the sampler's order, as ``fit()`` feeds ``train_step``;
        the dataset indices of the last ``grad_accum_steps`` batches are kept (``_recent``: what a non-finite loss
        names), and examples left out by ``skip_examples`` counted in ``state.skipped_examples``."""
        batches = micro_batches(self.train_data, self.sampler, self.state, self.config, self.collate_fn,
                                pin_memory=self.device.type == "cuda")
        self._recent = collections.deque(maxlen=self.config.grad_accum_steps)
        for batch in workers.guard_batches(batches, self.config.num_workers):  # worker failure -> ConfigError
            if isinstance(batch, MutableMapping):
                index = batch.pop(INDEX_KEY, None)
                self._recent.append([] if index is None else index.tolist())
                self.state.skipped_examples += int(batch.pop(SKIPPED_KEY, 0))
            yield batch

    def _prepare(self, batch: dict) -> dict:
        pad_id = getattr(getattr(self.model, "config", None), "pad_token_id", 0) or 0
        return prepare_batch(batch, self.device, self._pad_multiple, pad_id)

    # ----- one optimizer step ------------------------------------------------------------
    def train_step(self, window: list[dict], mark=None, votes=None) -> dict:
        """One optimizer step on ``window`` (``grad_accum_steps`` batches of ``batch_stream()``), as ``fit()``
        runs it and ``nbkit.profiling`` times it. ``mark(phase)`` is called as ``data`` (to device), ``forward``,
        ``backward`` start per micro-batch, then ``optimizer``. ``votes()``: called once before the step's
        all-reduce, its floats ride along (``fit()``: stop after a Ctrl-C, checkpoint by time), so every rank
        acts at the same step. Returns sums over ranks: loss_sum (nats), n_label, finite (the update was applied),
        loss_finite, loss (the step's mean, nats; NaN or inf when not loss_finite), grad_norm, lr, samples, tokens,
        flops, votes (a tuple). A non-finite loss or gradient skips the update (``fit()`` stops on the loss)."""
        self.setup()
        mark = mark or (lambda phase: None)
        n_local = sum(int((b["labels"] != -100).sum()) for b in window)  # CPU tensors: no device sync
        n_label = D.global_label_tokens(n_local)       # all ranks' label tokens in the window
        if self.class_weights is not None:             # weighted mean: divide by the targets' weights
            n_label = D.all_reduce_sum(sum(label_weight_sum(b["labels"], self.class_weights) for b in window))
        loss_sum = torch.zeros((), device=self.device)
        tokens, seq_flops = 0, 0.0
        for i, raw in enumerate(window):
            mark("data")
            batch = self._prepare(raw)
            labels = batch.pop("labels")
            mark("forward")
            with D.maybe_no_sync(self._forward, is_last_microbatch=i == len(window) - 1):
                with self.precision.autocast():
                    if self._fused_weight is not None:   # output layer + CE chunk by chunk, no (B, T, V) logits
                        keep = labels != -100                                               # (B, T)
                        scored = labels[keep]                                               # (N,)
                        hidden = self.model.base_model(**batch).last_hidden_state[keep]     # (N, d)
                        loss = linear_cross_entropy_sum(hidden, self._fused_weight, scored)
                    else:
                        logits, scored = forward_logits(self._forward, batch, labels, self.sparse_head)
                        loss = token_loss_sum(logits, scored, self._weight_dev)  # scalar, fp32
                scaled = loss * self.dist.world_size / (n_label or 1)  # DDP averages grads: * W undoes it
                mark("backward")
                (self.scaler.scale(scaled) if self.scaler else scaled).backward()
            loss_sum += loss.detach()
            ids = batch["input_ids"]                                         # (B, T)
            tokens += ids.numel()
            if self._is_bert:  # MLM head rows: every position, or the scored ones (sparse); none for classification
                head_rows = scored.numel() if labels.dim() == 2 and not self._per_token else 0
                seq_flops += bert_batch_flops(self.model.config, ids.numel(), ids.shape[1], head_rows)
            elif self._is_causal:  # the output layer on every position
                seq_flops += ids.numel() * causal_flops_per_token(self.model.config, ids.shape[1])
        mark("optimizer")
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        max_norm = self.config.max_grad_norm or float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        samples = sum(len(b["labels"]) for b in window)
        voted = tuple(float(v) for v in votes()) if votes is not None else ()
        local = torch.cat([loss_sum.double().reshape(1),            # (4 + votes,): loss sum, tokens, samples, FLOPs
                           torch.tensor([tokens, samples, seq_flops, *voted], dtype=torch.float64,
                                        device=self.device)])
        vals = torch.cat([D.all_reduce_sum(local), grad_norm.double().reshape(1)]).tolist()  # the one sync/step
        loss_v, tokens, samples, seq_flops, *voted, norm_v = vals  # sums over ranks; grad norm equal on all ranks
        tokens, samples = int(tokens), int(samples)
        lr = self.optimizer.param_groups[0]["lr"]   # the LR this step used (before the scheduler steps)
        loss_finite = math.isfinite(loss_v)   # a GradScaler's overflow shows in the gradients, never in the loss
        finite = loss_finite and (self.scaler is not None or math.isfinite(norm_v))
        if finite:   # with a scaler, an overflow (non-finite grad norm) makes it skip the update itself
            (self.scaler.step(self.optimizer) if self.scaler else self.optimizer.step())
        self.state.skipped_steps += int(not (finite and math.isfinite(norm_v)))
        self.state.consecutive_nonfinite = 0 if finite else self.state.consecutive_nonfinite + 1
        if self.scaler:
            self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        with warnings.catch_warnings():  # a skipped first step makes torch warn; the schedule stays on step
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
            self.scheduler.step()
        return {"loss_sum": loss_v if finite else 0.0, "n_label": n_label if finite else 0, "finite": finite,
                "loss_finite": loss_finite, "loss": loss_v / (n_label or 1), "grad_norm": norm_v, "lr": lr,
                "samples": samples, "tokens": tokens, "flops": seq_flops, "votes": tuple(voted)}

    def _check_nonfinite(self, out: dict) -> None:
        """Stop at a non-finite loss (its step named: no later step recovers it), or after
        :data:`MAX_CONSECUTIVE_NONFINITE` skipped steps in a row of non-finite gradients (a GradScaler's overflow
        usually passes at the next step)."""
        st, limit = self.state, MAX_CONSECUTIVE_NONFINITE
        if not out.get("loss_finite", True):
            raise NonFiniteLossError(self._nonfinite_message(out["loss"]))
        if st.consecutive_nonfinite >= limit:
            raise NonFiniteLossError(
                f"{limit} optimizer steps in a row had non-finite gradients (step {st.step}, "
                f"{st.skipped_steps} skipped in all). Lower lr (now {self.config.lr}), raise warmup_ratio, "
                f"keep max_grad_norm set, use precision='bf16' or 'fp32' instead of fp16, and check the data "
                f"for empty or corrupt examples; then resume from the last checkpoint.")

    def _nonfinite_message(self, loss: float) -> str:
        from nbkit.models.bert import nonfinite_weights

        st, cfg = self.state, self.config
        bad = nonfinite_weights(self.model)
        dtype = str(next(self.model.parameters()).dtype).removeprefix("torch.")
        if bad:
            why = (f"the weights already hold NaN/inf ({len(bad)} tensors, e.g. {bad[0]}): an earlier update diverged"
                   + (f"; the parameters are {dtype}, where AdamW's updates underflow: load the model in float32 "
                      "(nbkit's loaders do) and let precision choose the autocast" if dtype != "float32" else ""))
        else:
            why = f"the weights are finite: this step's batch or forward pass overflowed (precision {self.precision.name})"
        where = self.last_checkpoint or "none saved yet"
        seen = sorted({i for b in getattr(self, "_recent", ()) for i in b})
        rank = f" on rank {self.dist.rank}" if self.dist.world_size > 1 else ""
        named, skip = "", ""
        if seen:
            shown = ", ".join(self._example_name(i) for i in seen[:20]) + (", ..." if len(seen) > 20 else "")
            named = f" The step's batch{rank} held these examples of train_data (index in the dataset): {shown}."
            skip = (f"; or, if the weights are finite, leave those examples out and resume (same folder): "
                    f"{skip_examples_fix([*cfg.skip_examples, *seen])} (counted in the run's summary, metrics.json, "
                    "as skipped_examples)")
        return (f"the training loss is {loss} at step {st.step} of {cfg.max_steps}, so the run stops there (that "
                f"step's update was not applied; nothing of it is saved): {why}.{named} Fix: lower lr (now {cfg.lr}), "
                f"raise warmup_ratio, use precision='bf16' or 'fp32' instead of fp16, check the data for empty or "
                f"corrupt examples; then resume from the last checkpoint ({where}) or start afresh{skip}.")

    def _example_name(self, i: int) -> str:
        """Example ``i`` of ``train_data`` as a message names it: ``"12"``, or with the file and line where the
        dataset says (a ``describe_example(i)`` method)."""
        describe = getattr(self.train_data, "describe_example", None)
        if describe is None:
            return str(i)
        try:
            return f"{i} ({describe(i)})"
        except Exception:  # noqa: BLE001  (a name is a courtesy: never hide the real error behind it)
            return str(i)

    # ----- the run -----------------------------------------------------------------------
    def fit(self) -> TrainResult:
        """Train to ``max_steps``, resuming from ``output_dir`` when ``config.resume``; returns a TrainResult.

        A fresh run sets an earlier run's checkpoints aside (``checkpoint.set_aside_earlier``). Holds the
        ``output_dir`` lock; warns when resuming with changed settings, and under another number of processes
        keeps the global batch when it can (``checkpoint.keep_global_batch``). An exception leaving it carries
        ``exc.nbkit_stopped = {"step", "max_steps", "output_dir", "signal", "seconds"}`` (seconds from a
        SIGTERM to the checkpoint saved, which must fit the sender's grace period; None for Ctrl-C).

        Raises:
            ConfigError: another run holds ``output_dir``.
            DataError: no batch, or batches without ``labels``/``input_ids`` (before any step).
            NonFiniteLossError: a non-finite loss (the step named), or :data:`MAX_CONSECUTIVE_NONFINITE` steps in a
                row skipped for non-finite gradients.
            NonFiniteWeightsError: a checkpoint would hold NaN/infinite weights (nothing written).
            TrainingInterrupted: Ctrl-C or SIGTERM, after the checkpoint at the step boundary (with ``output_dir``).
        """
        self.setup()
        self._held = None   # the signal handler of this fit (set by _fit), for exc.nbkit_stopped
        with self._output_lock():
            try:
                return self._fit()
            except BaseException as exc:
                held = self._held
                with contextlib.suppress(AttributeError, TypeError):
                    term = held is not None and held.signum == signal.SIGTERM
                    exc.nbkit_stopped = {"step": self.state.step, "max_steps": self.config.max_steps,
                                         "output_dir": self.config.output_dir,
                                         "signal": held.signum.name if held and held.signum else None,
                                         "seconds": round(time.monotonic() - held.t, 1) if term else None}
                raise

    def _output_lock(self):
        """The lock on ``output_dir`` (rank 0 only: the ranks are one run); a no-op without one."""
        if self.config.output_dir is None or not self.dist.is_main:
            return contextlib.nullcontext()
        self._lock = getattr(self, "_lock", None) or RunLock(self.config.output_dir)
        return self._lock

    def _check_data(self) -> None:
        cfg = self.config
        for data, name in ((self.train_data, "train_data"), (self.eval_data, "eval_data")):
            if data is not None:
                preflight.check_batches(data, self.collate_fn, cfg.seed, name)
                preflight.check_sequence_length(self.model, data, name, self._pad_multiple)
                preflight.check_token_ids(self.model, data, name)
        self._eval_checked = True
        workers.check_worker_shm(self.train_data, self.collate_fn, cfg.batch_size, cfg.num_workers, cfg.seed)

    def _fit(self) -> TrainResult:
        from tqdm.auto import tqdm

        self._check_data()
        resumed = self.config.resume and self.config.output_dir is not None and self._resume()
        cfg, st = self.config, self.state   # _resume may change grad_accum_steps (the global batch kept)
        if not resumed and cfg.output_dir is not None and self.dist.is_main:
            aside = ckpt.set_aside_earlier(cfg.output_dir, keep=self.last_checkpoint)
            if aside is not None:
                from nbkit.atomic import tree_bytes

                print(f"a fresh run in {cfg.output_dir}: the earlier run's checkpoints moved to {aside} "
                      f"({tree_bytes(aside) / 2**20:,.1f} MiB; delete it once you no longer need them)")
            for gone, size in ckpt.prune_previous(cfg.output_dir, cfg.keep_previous):
                print(f"removed {gone} ({size / 2**20:,.1f} MiB), an older run's checkpoints: keep_previous="
                      f"{cfg.keep_previous} keeps the newest {cfg.keep_previous} earlier run(s) (0: all)")
        self._emit("on_train_begin")
        bar = tqdm(total=cfg.max_steps, initial=st.step, disable=not (cfg.progress and self.dist.is_main),
                   desc="train", unit="step")
        batches = self.batch_stream()
        self._win, self._run = dict.fromkeys(_SUMS, 0), dict.fromkeys(_SUMS, 0)  # this log window, whole run
        frames0 = None
        t0 = self._t_start = time.perf_counter()
        self._last_save_t = time.monotonic()
        self.model.train()
        self.stop_training = False  # a callback (e.g. EarlyStopping) may set it to end the run early
        with _HeldInterrupt(self.dist.is_main) as interrupt, contextlib.closing(bar):
            self._held = interrupt
            votes = lambda: (interrupt.requested, self._checkpoint_due())  # noqa: E731
            while st.step < cfg.max_steps and not self.stop_training:
                out = self.last_step = self.train_step([next(batches) for _ in range(cfg.grad_accum_steps)],
                                                       votes=votes)
                stop, save_due = (v > 0 for v in out["votes"])
                st.step += 1
                st.train_tokens += out["tokens"]
                for k in _SUMS[:-1]:
                    self._win[k] += out[k]
                self._check_nonfinite(out)
                if frames0 is None and cfg.compile:
                    frames0 = _dynamo_frames()  # after the first step's compile
                bar.update(1)
                self._emit("on_step_end")
                if stop:                    # some rank got a Ctrl-C or SIGTERM: all save this step, then stop
                    self._stop_interrupted(out, time.perf_counter() - t0, interrupt)
                if st.step % cfg.log_every == 0 or st.step == cfg.max_steps:
                    logs = self._log(out, time.perf_counter() - t0)
                    bar.set_postfix(loss=f"{logs['loss']:.4f}", lr=f"{logs['lr']:.2e}")
                    t0 = time.perf_counter()
                if self.eval_data is not None and cfg.eval_every and st.step % cfg.eval_every == 0:
                    self._record_eval(self.evaluate())
                    t0 = time.perf_counter()  # keep eval time out of throughput
                if (save_due or (cfg.checkpoint_every and st.step % cfg.checkpoint_every == 0)
                        or st.step in cfg.keep_steps):
                    self.save()
                    t0 = time.perf_counter()
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

    def _checkpoint_due(self) -> bool:
        """True when ``checkpoint_minutes`` passed since the last save (on this rank's clock)."""
        cfg = self.config
        return bool(cfg.output_dir is not None and cfg.checkpoint_minutes
                    and time.monotonic() - self._last_save_t >= 60.0 * cfg.checkpoint_minutes)

    def _stop_interrupted(self, out: dict, dt: float, held: "_HeldInterrupt") -> None:
        """After a Ctrl-C or SIGTERM: log the open window, save (every rank, with ``output_dir``), raise
        TrainingInterrupted naming the signal and, for SIGTERM, the seconds from the signal to the saved checkpoint
        (what must fit in the sender's grace period)."""
        st, cfg = self.state, self.config
        if self._win["samples"]:
            self._log(out, dt)
        who = "SIGTERM" if held.signum == signal.SIGTERM else "Ctrl-C"
        where = f"stopped at step {st.step} of {cfg.max_steps}"
        if cfg.output_dir is None:
            raise TrainingInterrupted(f"{who}: {where}; nothing saved (no output_dir): set "
                                      "TrainConfig(output_dir=...) to keep the work of an interrupted run.")
        path = self.save()
        took = f" ({time.monotonic() - held.t:.1f} s after the signal)" if held.signum == signal.SIGTERM else ""
        raise TrainingInterrupted(f"{who}: {where}; checkpoint saved: {path}{took}. Run the same cell or command "
                                  "again to resume from it (resume=True, the default).")

    def _rates(self, sums: dict) -> dict:
        dt = sums["time"]
        return {"samples_per_s": sums["samples"] / dt if dt else None,
                "tokens_per_s": sums["tokens"] / dt if dt else None,
                "mfu": mfu(sums["flops"] / dt, 1.0, self.peak_tflops and self.peak_tflops * self.dist.world_size)
                if dt and sums["flops"] else None}  # flops of all ranks / (peak per GPU x GPUs)

    def _log(self, out: dict, dt: float) -> dict:
        st, win = self.state, self._win
        win["time"] = dt
        pos = st.epoch_start + st.batch_in_epoch * self.config.batch_size * self.dist.world_size
        logs = {"step": st.step, "epoch": st.epoch + min(pos, len(self.train_data)) / len(self.train_data),
                "loss": win["loss_sum"] / win["n_label"] if win["n_label"] else float("nan"),
                "lr": out["lr"], "grad_norm": out["grad_norm"], **self._rates(win),
                "elapsed_s": time.perf_counter() - self._t_start, "window_s": dt,
                "skipped_steps": st.skipped_steps}
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
                "skipped_examples": st.skipped_examples, "skip_examples": list(self.config.skip_examples),
                "train_loss": losses[-1] if losses else None, "precision": self.precision.name,
                "device": str(self.device), **self._rates(self._run), "recompilations": self.recompilations,
                **({k: v for k, v in evals[-1].items() if k != "step"} if evals else {})}

    def _record_eval(self, metrics: dict) -> None:
        self.state.history.append({"step": self.state.step, **metrics})
        self._emit("on_evaluate", metrics)

    # ----- held-out evaluation -----------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, max_batches: int | None = None) -> dict:
        """Held-out metrics on ``eval_data`` in eval mode; the training RNG never moves (exact resume).

        ``eval_loss``: mean CE per label token over the whole set (nats; independent of batch size and padding),
        ``eval_tokens``: label tokens scored. MLM (labels (B, T)): ``eval_perplexity``; with a collator naming its
        ``mask_id`` also ``eval_{mask,random,kept}_loss``/``_tokens`` (:func:`target_kinds`). Classification
        (labels (B,)): ``eval_accuracy``, ``eval_macro_f1``, ``eval_examples``. No label scored: NaN and a warning.
        ``max_batches``: default ``config.eval_batches`` (None: all); batch i is masked with seed + i; under DDP
        rank r scores batches r, r + W, ...

        Raises:
            ConfigError: no eval_data, or its sequences exceed ``max_position_embeddings`` (checked once).
            DataError: eval_data gives no batch, or a token id outside the vocabulary (checked once).
        """
        from nbkit.switches import model_mode

        if self.eval_data is None:
            raise ConfigError("evaluate() needs eval data: pass Loop(..., eval_data=...).")
        self.setup()
        if not self._eval_checked:  # evaluate() may run before fit() (the untrained loss)
            preflight.check_sequence_length(self.model, self.eval_data, "eval_data", self._pad_multiple)
            preflight.check_token_ids(self.model, self.eval_data, "eval_data")
            self._eval_checked = True
        with model_mode(self.model, training=False):
            return self._evaluate(max_batches or self.config.eval_batches)

    def _evaluate(self, max_batches: int | None) -> dict:
        from nbkit.evaluate.metrics import macro_f1
        from nbkit.switches import isolated_rng

        cfg, model, dev = self.config, self.model, self.device
        collate = self.collate_fn or torch.utils.data.default_collate
        sparse = uses_sparse_head(model, False)  # eval runs the plain module, never compiled
        loss_sum, correct = torch.zeros((), device=dev), torch.zeros((), device=dev)
        k = getattr(getattr(model, "config", None), "num_labels", None) or 0
        confusion = torch.zeros(k * k, device=dev)                    # (C*C,) true x predicted, classification
        n, n_mlm, n_batches = 0, 0, 0
        mask_id = getattr(collate, "mask_id", None)
        by_kind = torch.zeros(len(TARGET_KINDS), 2, dtype=torch.float64, device=dev)  # (kind, [CE sum, n])
        for i, idx in eval_shard(len(self.eval_data), cfg.batch_size, max_batches, self.dist):
            with isolated_rng(cfg.seed + i):
                raw = collate([self.eval_data[j] for j in idx])
            batch = self._prepare(raw)
            labels = batch.pop("labels")                                  # (B, T) or (B,)
            n_mlm += labels.dim() == 2 and not self._per_token
            by_kinds = mask_id is not None and labels.dim() == 2
            kinds = target_kinds(batch["input_ids"], labels, mask_id) if by_kinds else None
            with self.precision.autocast():
                logits, scored = forward_logits(model, batch, labels, sparse)  # (B, T, V) or (N, V) or (B, C)
                if kinds is None:
                    loss_sum += token_loss_sum(logits, scored)
            if kinds is not None:  # one per-target CE gives the loss and its split by kind
                sums = _kind_sums(logits, scored, kinds[labels != -100] if sparse else kinds)   # (K, 2)
                by_kind += sums
                loss_sum += sums[:, 0].sum()
            labels = scored
            mask = labels != -100
            n += int(mask.sum())
            n_batches += 1
            correct += ((logits.argmax(-1) == labels) & mask).sum()
            if (labels.dim() == 1 or self._per_token) and logits.shape[-1] == k:   # (B,) or (B, T) class ids
                confusion += torch.bincount((labels * k + logits.argmax(-1))[mask], minlength=k * k)
        kind_sums = {f"{kind}_{what}": v for kind, row in zip(TARGET_KINDS, by_kind.tolist())
                     for what, v in zip(("sum", "n"), row)} if mask_id is not None else {}
        tot = D.all_reduce_dict({"loss_sum": loss_sum.item(), "n": n, "correct": correct.item(),
                                 "n_mlm": n_mlm, "n_batches": n_batches, **kind_sums})   # sums over ranks
        if tot["n_batches"] == 0:
            raise DataError(f"evaluation got no batch: eval_data has {len(self.eval_data)} examples; pass a "
                            "non-empty eval_data (or eval_data=None to train without evaluation).")
        n = int(tot["n"])
        if n == 0:  # no score from nothing: NaN, not loss 0 / perplexity 1
            warnings.warn(f"evaluation scored 0 labels in {int(tot['n_batches'])} batches (every label is -100); "
                          "its metrics are NaN. Check that collate_fn sets labels for eval_data.",
                          UserWarning, stacklevel=4)
        loss = tot["loss_sum"] / n if n else math.nan
        metrics = {"eval_loss": loss, "eval_tokens": n}
        accuracy = tot["correct"] / n if n else math.nan   # targets predicted exactly (top-1)
        if tot["n_mlm"] > 0:
            metrics["eval_perplexity"] = math.exp(min(loss, 700.0))  # exp overflows float64 above ~709
            metrics["eval_accuracy"] = accuracy
            for kind in TARGET_KINDS if kind_sums else ():
                k_n = int(tot[f"{kind}_n"])
                metrics[f"eval_{kind}_loss"] = tot[f"{kind}_sum"] / k_n if k_n else math.nan
                metrics[f"eval_{kind}_tokens"] = k_n
            return metrics
        if not self._per_token:  # one label per example: eval_tokens (= examples) kept for older readers
            metrics["eval_examples"] = n
        metrics["eval_accuracy"] = accuracy
        if k:  # every rank takes this branch (n_mlm is summed), so the all-reduce matches
            metrics["eval_macro_f1"] = macro_f1(D.all_reduce_sum(confusion).view(k, k))
        return metrics

    # ----- checkpoints -------------------------------------------------------------------
    def save(self) -> Path:
        """Write an atomic checkpoint of everything needed to resume exactly; returns its folder. Under DDP every
        rank calls it and rank 0 writes (``nbkit.train.checkpoint.save_loop``).

        Raises:
            ConfigError: no ``output_dir``, or another run holds it.
            WriteError: the file system refused the write (nothing of it is left).
        """
        if self.config.output_dir is None:
            raise ConfigError("save() needs a directory: set TrainConfig(output_dir=...).")
        self.setup()
        with self._output_lock():
            self.last_checkpoint = ckpt.save_loop(self)
        self._last_save_t = time.monotonic()
        self._emit("on_save", self.last_checkpoint)
        return self.last_checkpoint

    def _resume(self) -> bool:
        """Restore the newest complete checkpoint in ``output_dir``; False when there is none."""
        restored = ckpt.restore_latest(self)
        if restored is None:
            return False
        found, saved = restored
        self.last_checkpoint = found.path
        cfg = self.config
        accum, note, kept = ckpt.keep_global_batch(saved, cfg.batch_size, cfg.grad_accum_steps, self.dist.world_size)
        if accum != cfg.grad_accum_steps:
            self.config = dataclasses.replace(cfg, grad_accum_steps=accum)
        if self.dist.is_main:
            then, now = int(saved.get("world_size", 1)), self.dist.world_size   # no world_size saved: one process
            sizes = (f"world size {now}" if then == now
                     else f"written by {then} process{'es' if then != 1 else ''}, resumed under {now}")
            print(f"resumed from {found.path} (step {self.state.step}, {sizes})"
                  + (f"; {note}" if note and kept else ""))
            if note and not kept:
                warnings.warn(note, UserWarning, stacklevel=4)
            preflight.warn_resume_changes(self, saved, found.path)  # changed settings, nothing to do
        return True

    def _emit(self, event: str, *args) -> None:
        if not self.dist.is_main:
            return
        for cb in self.callbacks:
            fn = getattr(cb, event, None)
            if fn is not None:
                fn(self, *args)


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped ``fit()`` at a step boundary, after its checkpoint; the message says how to resume.
    Jupyter shows it as that one line (IPython's ``_render_traceback_`` protocol), and it stops papermill."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class _HeldInterrupt:
    """While training, a SIGINT (Ctrl-C) or SIGTERM sets ``requested`` (the loop stops at the step's end, saving a
    checkpoint) and says so on stdout; another one at least 1 s later raises ``KeyboardInterrupt`` at once.
    ``signum``: the first signal; ``t``: when it came. Main thread only; an ignored signal stays ignored (an
    ignored SIGINT is announced with the SIGTERM that stops the job instead). ``announce``: print the notices."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, announce: bool = True):
        self.announce, self.requested, self.signum, self.t, self._prev = announce, False, None, 0.0, {}

    def __enter__(self) -> "_HeldInterrupt":
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                prev = signal.getsignal(sig)
                if prev is not signal.SIG_IGN and prev is not None:
                    self._prev[sig] = prev
                    signal.signal(sig, self._handle)
            if signal.SIGINT not in self._prev and signal.SIGTERM in self._prev:
                self._say(f"SIGINT is ignored in this process (started in the background by a script, or under "
                          f"nohup), so Ctrl-C and `kill -INT` do not stop it: `kill {os.getpid()}` (SIGTERM) stops "
                          "it after the running step with a checkpoint saved")
        return self

    def _say(self, text: str) -> None:
        if self.announce:
            with contextlib.suppress(Exception):  # a print interrupted mid-write may refuse a second one
                print(text, file=sys.stdout, flush=True)

    def _handle(self, signum, frame) -> None:
        now = time.monotonic()
        if self.requested and now - self.t >= 1.0:
            raise KeyboardInterrupt
        if not self.requested:
            self.requested, self.signum, self.t = True, signal.Signals(signum), now
            who = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
            self._say(f"{who}: stopping after this step and saving a checkpoint ({who} again to stop at once)")

    def __exit__(self, *exc) -> None:
        for sig, prev in self._prev.items():
            signal.signal(sig, prev)


MAX_CONSECUTIVE_NONFINITE = 5  # skipped (non-finite) steps in a row before fit() gives up
_SUMS = ("loss_sum", "n_label", "samples", "tokens", "flops", "time")  # summed per log window
TARGET_KINDS = ("mask", "random", "kept")  # what the collator put at a target: [MASK], another token, itself


def _dynamo_frames() -> int:
    """Frames dynamo has compiled so far (each recompilation adds one)."""
    from torch._dynamo.utils import counters

    return int(counters["frames"]["ok"])


def eval_shard(n_examples: int, batch_size: int, max_batches: int | None, info) -> list[tuple[int, list[int]]]:
    """This rank's evaluation batches ``[(batch_index, example indices), ...]``: the one-process batches
    (``batch_size`` each, at most ``max_batches``), rank r taking batches r, r + W, ..."""
    n_batches = -(-n_examples // batch_size)
    if max_batches:
        n_batches = min(n_batches, max_batches)
    return [(i, list(range(i * batch_size, min((i + 1) * batch_size, n_examples))))
            for i in range(info.rank, n_batches, info.world_size)]


def target_kinds(input_ids: torch.Tensor, labels: torch.Tensor, mask_id: int) -> torch.Tensor:
    """Index into :data:`TARGET_KINDS` per position: 0 where the input is ``[MASK]``, 2 where it is the target
    itself, 1 otherwise (a random replacement). input_ids, labels: (B, T); returns (B, T) int64, meaningful
    where ``labels != -100`` (exact: ``MLMCollator`` never picks ``[MASK]`` as a target)."""
    kinds = torch.ones_like(labels)
    kinds[input_ids == labels] = 2
    kinds[input_ids == mask_id] = 0
    return kinds


def _kind_sums(logits: torch.Tensor, labels: torch.Tensor, kinds: torch.Tensor) -> torch.Tensor:
    """(len(TARGET_KINDS), 2) float64: CE sum (nats) and target count per kind; logits (..., V), labels and kinds (...)."""
    import torch.nn.functional as F

    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
                         ignore_index=-100, reduction="none").double()              # (N,)
    valid = labels.reshape(-1) != -100
    one_hot = F.one_hot(kinds.reshape(-1)[valid], len(TARGET_KINDS)).double()      # (n, K)
    return torch.stack([ce[valid] @ one_hot, one_hot.sum(0)], dim=1)                # (K, 2)

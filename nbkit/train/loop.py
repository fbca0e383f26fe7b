"""The nbkit training loop: readable, exact to resume, hard to corrupt.

One optimizer step (``grad_accum_steps`` = k micro-batches)::

    n = label tokens (labels != -100) in all k micro-batches  # counted on CPU (+ summed over ranks)
    for each micro-batch:  loss_sum = CE(logits, labels, reduction="sum")
                           backward(loss_sum * W / n)          # = one batch of k x the size (W ranks)
    unscale (fp16) -> clip grad norm -> one host sync (loss, grad norm)
    non-finite? skip the update and count it; else optimizer step
    scheduler step; log / eval / checkpoint on their intervals     # all but this line: Loop.train_step

Under ``torchrun`` (W > 1) the loop runs DDP (``nbkit.train.ddp.group`` lists each point): sharded
order, ``n`` summed over ranks, loss x ``W / n``, ``no_sync`` but on the last micro-batch, rank-0-only
logs/callbacks/checkpoints, sharded evaluation. Global batch = ``W * batch_size * grad_accum_steps``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
import warnings
from pathlib import Path

import torch

from nbkit.errors import ConfigError, NonFiniteLossError
from nbkit.models.flops import bert_batch_flops, mfu, peak_tflops
from nbkit.models.mlm_head import forward_logits, uses_sparse_head
from nbkit.train import checkpoint as ckpt
from nbkit.train import preflight, workers
from nbkit.train.batching import input_lengths, micro_batches, prepare_batch
from nbkit.train.config import TrainConfig, TrainResult, TrainState  # noqa: F401  (re-exported)
from nbkit.train.ddp import group as D
from nbkit.train.ddp.launcher_watch import watch_launcher
from nbkit.train.ddp.rendezvous import should_join
from nbkit.train.ddp.sampler import ResumableDistributedSampler
from nbkit.train.loss import class_weights, label_weight_sum, token_loss_sum
from nbkit.train.optim import build_optimizer, build_scheduler
from nbkit.train.precision import choose_precision, matmul_precision_name
from nbkit.train.progress_file import with_env_progress
from nbkit.train.run_lock import RunLock


class Loop:
    """Train ``model`` on ``train_data`` with ``config``; see the module docstring.

    model: a Hugging Face model whose output has ``.logits`` (BertForMaskedLM,
        BertForSequenceClassification, ...); labels are never passed to it.
    train_data / eval_data: map-style datasets; ``collate_fn`` turns a list of
        examples into a dict of tensors with ``labels`` (-100 = ignored).
    callbacks: objects with any of ``on_train_begin(loop)``, ``on_log(loop, logs)``,
        ``on_evaluate(loop, metrics)``, ``on_save(loop, path)``,
        ``on_step_end(loop)``, ``on_train_end(loop, result)``.
    device: default CUDA when available, else CPU (under torchrun: ``cuda:LOCAL_RANK``).
    Raises ``ConfigError`` (unusable device or output_dir) or ``DataError`` (empty data)
    here, before any work (``nbkit.train.preflight``); ``fit()`` checks batches have labels.
    Under torchrun with ``WORLD_SIZE`` > 1 it joins the process group
    (``nbkit.train.ddp.group.init_distributed``: NCCL on CUDA, gloo on CPU); every rank
    must build the same model and data and call ``fit()``.
    Read by profiling: ``sparse_head`` (MLM logits only at label positions, ``nbkit.models.mlm_head``) and
    ``peak_tflops`` (this device's dense peak at the loop's matmul precision, TFLOP/s; None off CUDA or
    unknown), the MFU denominator.
    """

    def __init__(self, model, config: TrainConfig, train_data, eval_data=None, collate_fn=None,
                 callbacks=(), device=None):
        self.config, self.train_data, self.eval_data = config, train_data, eval_data
        self.collate_fn, self.callbacks = collate_fn, with_env_progress(list(callbacks))  # + $NBKIT_PROGRESS_FILE
        self.dist = D.init_distributed() if should_join() else D.DistInfo()
        watch_launcher()  # also under torchrun --nproc-per-node=1: stop when the launcher dies
        default = self.dist.device if self.dist.is_distributed else ("cuda" if torch.cuda.is_available() else "cpu")
        self.device = torch.device(device or default)
        preflight.check_device(self.device)            # each raises naming the fix, before any work
        preflight.check_output_dir(config.output_dir)
        preflight.check_not_empty(train_data, "train_data")
        if eval_data is not None:
            preflight.check_not_empty(eval_data, "eval_data")
        self.model = model.to(self.device)  # the plain module: eval, clipping, checkpoints
        num_labels = getattr(getattr(model, "config", None), "num_labels", None)
        self.class_weights = class_weights(config.class_weights, train_data, num_labels)  # (C,) CPU, or None
        self._weight_dev = None if self.class_weights is None else self.class_weights.to(self.device)
        D.seed_rank(config.seed, self.dist.rank)  # dropout/collator RNG: same seed, same run
        self.precision = choose_precision(config.precision, self.device)
        self.optimizer = build_optimizer(self.model, config.lr, config.weight_decay)
        self.scheduler = build_scheduler(self.optimizer, config.scheduler, config.max_steps, config.warmup_ratio)
        self.scaler = self.precision.make_scaler()
        self.sampler = self._make_sampler()
        self.state = TrainState()
        self.last_checkpoint: Path | None = None
        self.recompilations: int | None = None
        self._forward = self.model  # what training forwards through: DDP-wrapped, compiled
        if self.dist.is_distributed:
            self._forward = D.wrap_ddp(self.model, dataclasses.replace(self.dist, device=str(self.device)))
        if config.compile:
            backend = config.compile if isinstance(config.compile, str) else "inductor"
            self._forward = torch.compile(self._forward, backend=backend, dynamic=False)
        self._pad_multiple = config.pad_to_multiple_of or (64 if config.compile else None)
        self._is_bert = getattr(getattr(model, "config", None), "model_type", None) == "bert"
        self.sparse_head = uses_sparse_head(model, config.compile)  # MLM head on masked positions only
        peak_name = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else ""
        self.peak_tflops = peak_tflops(peak_name, matmul_precision_name(self.precision)) if peak_name else None

    # ----- points where DDP plugs in -----------------------------------------------------
    def _make_sampler(self):
        # one global order per epoch (seed + epoch), rank r reads every W-th; the consumed part is
        # a prefix of that order for any W, so checkpoints move between 1 and N processes
        lengths = input_lengths(self.train_data) if self.config.group_by_length else None
        w = self.dist.world_size
        return ResumableDistributedSampler(len(self.train_data), num_replicas=w, rank=self.dist.rank, shuffle=True,
                                           seed=self.config.seed, lengths=lengths, group_size=self.config.batch_size * w)

    def _backward_context(self, micro: int, n_micro: int):
        return D.maybe_no_sync(self._forward, is_last_microbatch=micro == n_micro - 1)

    def _reduce(self, values: torch.Tensor) -> torch.Tensor:
        return D.all_reduce_sum(values)  # sum over ranks; identity for one process

    def _is_main(self) -> bool:
        return self.dist.is_main

    # ----- data --------------------------------------------------------------------------
    def batch_stream(self):
        """Endless collated micro-batches (CPU tensors) in the sampler's order, as ``fit()`` feeds ``train_step``."""
        batches = micro_batches(self.train_data, self.sampler, self.state, self.config, self.collate_fn,
                                pin_memory=self.device.type == "cuda")
        return workers.guard_batches(batches, self.config.num_workers)  # worker failure -> ConfigError

    def _prepare(self, batch: dict) -> dict:
        pad_id = getattr(getattr(self.model, "config", None), "pad_token_id", 0) or 0
        return prepare_batch(batch, self.device, self._pad_multiple, pad_id)

    # ----- one optimizer step ------------------------------------------------------------
    def train_step(self, window: list[dict], mark=None) -> dict:
        """One optimizer step on ``window`` (``grad_accum_steps`` batches of ``batch_stream()``) as ``fit()`` runs it
        and ``nbkit.profiling`` times it. ``mark(phase)`` is called as ``data`` (to device), ``forward``, ``backward``
        start per micro-batch, then ``optimizer``. Returns loss_sum, n_label, finite, grad_norm, lr, samples, tokens, flops."""
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
            with self._backward_context(i, len(window)):
                with self.precision.autocast():
                    logits, scored = forward_logits(self._forward, batch, labels, self.sparse_head)
                    loss = token_loss_sum(logits, scored, self._weight_dev)  # scalar, fp32
                scaled = loss * self.dist.world_size / (n_label or 1)  # DDP averages grads: * W undoes it
                mark("backward")
                (self.scaler.scale(scaled) if self.scaler else scaled).backward()
            loss_sum += loss.detach()
            ids = batch["input_ids"]                                         # (B, T)
            tokens += ids.numel()
            if self._is_bert:  # MLM head rows: every position, or the scored ones (sparse); none for classification
                head_rows = scored.numel() if labels.dim() == 2 else 0
                seq_flops += bert_batch_flops(self.model.config, ids.numel(), ids.shape[1], head_rows)
        mark("optimizer")
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        max_norm = self.config.max_grad_norm or float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        samples = sum(len(b["labels"]) for b in window)
        local = torch.cat([loss_sum.double().reshape(1),            # (4,): loss sum, tokens, samples, FLOPs
                           torch.tensor([tokens, samples, seq_flops], dtype=torch.float64, device=self.device)])
        vals = torch.cat([self._reduce(local), grad_norm.double().reshape(1)]).tolist()  # the one sync/step
        loss_v, tokens, samples, seq_flops, norm_v = vals  # sums over ranks; grad norm equal on all ranks
        tokens, samples = int(tokens), int(samples)
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
                "grad_norm": norm_v, "lr": lr, "samples": samples, "tokens": tokens, "flops": seq_flops}
    _step = train_step  # the name the loop's own tests use

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
        """Train to ``max_steps`` and return a TrainResult (see ``_fit``), holding the lock on
        ``output_dir`` (``nbkit.train.run_lock``) throughout: a second run there is a ``ConfigError``.
        Any exception leaving it (Ctrl-C's ``KeyboardInterrupt`` too) carries where the run stopped as
        ``exc.nbkit_stopped`` = ``{"step", "max_steps", "output_dir"}`` (the jobs' last line reads it)."""
        with self._output_lock():
            try:
                return self._fit()
            except BaseException as exc:
                with contextlib.suppress(AttributeError, TypeError):
                    exc.nbkit_stopped = {"step": self.state.step, "max_steps": self.config.max_steps,
                                         "output_dir": self.config.output_dir}
                raise

    def _output_lock(self):
        """The lock on ``output_dir`` (rank 0 only: the ranks are one run); a no-op without one."""
        if self.config.output_dir is None or not self._is_main():
            return contextlib.nullcontext()
        self._lock = getattr(self, "_lock", None) or RunLock(self.config.output_dir)
        return self._lock

    def _fit(self) -> TrainResult:
        """Train to ``max_steps`` (resuming from ``output_dir`` when possible) and return a TrainResult.

        Raises ``NonFiniteLossError`` after ``max_consecutive_nonfinite``
        skipped steps in a row, ``DataError`` when the data yields no batch or batches lack
        ``labels``/``input_ids`` (checked before the first step). On resume
        it warns when the config differs from the checkpoint's (the optimizer and LR
        schedule continue from the checkpoint) or the checkpoint is at/after max_steps.
        """
        from tqdm.auto import tqdm

        cfg, st = self.config, self.state
        preflight.check_batches(self.train_data, self.collate_fn, cfg.seed, "train_data")  # before any step
        preflight.check_sequence_length(self.model, self.train_data, "train_data", self._pad_multiple)
        preflight.check_token_ids(self.model, self.train_data, "train_data")
        if self.eval_data is not None:
            preflight.check_batches(self.eval_data, self.collate_fn, cfg.seed, "eval_data")
            preflight.check_sequence_length(self.model, self.eval_data, "eval_data", self._pad_multiple)
            preflight.check_token_ids(self.model, self.eval_data, "eval_data")
            self._eval_length_checked = True   # evaluate() runs these two checks only when fit() has not
        workers.check_worker_shm(self.train_data, self.collate_fn, cfg.batch_size, cfg.num_workers, cfg.seed)
        if cfg.resume and cfg.output_dir is not None:
            self._resume()
        self._emit("on_train_begin")
        bar = tqdm(total=cfg.max_steps, initial=st.step, disable=not (cfg.progress and self._is_main()),
                   desc="train", unit="step")
        batches = self.batch_stream()
        self._win, self._run = dict.fromkeys(_SUMS, 0), dict.fromkeys(_SUMS, 0)  # this log window, whole run
        frames0 = None
        t0 = self._t_start = time.perf_counter()
        self.model.train()
        self.stop_training = False  # a callback (e.g. EarlyStopping) may set it to end the run early
        while st.step < cfg.max_steps and not self.stop_training:
            out = self.train_step([next(batches) for _ in range(cfg.grad_accum_steps)])
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
                "train_loss": losses[-1] if losses else None, "precision": self.precision.name,
                "device": str(self.device), **self._rates(self._run), "recompilations": self.recompilations,
                **({k: v for k, v in evals[-1].items() if k != "step"} if evals else {})}

    def _record_eval(self, metrics: dict) -> None:
        self.state.history.append({"step": self.state.step, **metrics})
        self._emit("on_evaluate", metrics)

    def evaluate(self, max_batches: int | None = None) -> dict:
        """Held-out metrics (see ``nbkit.train.heldout_eval.evaluate``); never moves the training RNG."""
        from nbkit.train.heldout_eval import evaluate

        return evaluate(self, max_batches)

    # ----- checkpoints -------------------------------------------------------------------
    def save(self) -> Path:
        """Write an atomic checkpoint of everything needed to resume exactly; returns its directory.

        Under DDP every rank must call it (see ``nbkit.train.checkpoint.save_loop``): rank 0 writes.
        """
        if self.config.output_dir is None:
            raise ConfigError("save() needs a directory: set TrainConfig(output_dir=...).")
        with self._output_lock():
            self.last_checkpoint = ckpt.save_loop(self)
        self._emit("on_save", self.last_checkpoint)
        return self.last_checkpoint

    def _resume(self) -> None:
        found = ckpt.load_latest(self.config.output_dir)
        if found is None:
            return
        saved = ckpt.restore_loop(self, found)
        self.last_checkpoint = found.path
        if self._is_main():
            print(f"resumed from {found.path} (step {self.state.step}, {ckpt.world_sizes(saved, self.dist.world_size)})")
            preflight.warn_resume_changes(self, saved, found.path)  # changed settings, nothing to do

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

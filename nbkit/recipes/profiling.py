"""The profiling recipe (notebook 04, and the matmul sizes of notebook 00): what to time and how long.

Notebook 04 times the training loop's own step (:mod:`nbkit.profiling`) on notebook 02's model, or the same
architecture built from config; this config holds every size it uses.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nbkit.recipes.config import RecipeConfig


@dataclass(frozen=True, repr=False)
class ProfileConfig(RecipeConfig):
    """Every size notebook 04 uses; build it with :meth:`for_scale`."""

    model: str
    vocab_size: int
    profile_steps: int
    bench_sizes: tuple
    seq_len: int
    batch_size: int
    timing_steps: int
    warmup_steps: int
    sdpa_batch: int
    sdpa_heads: int
    h2d_mib: int
    worker_values: tuple
    compile_values: tuple
    sdpa_seq_lens: tuple = (128, 512)
    init: str | None = None

    RECIPE, STEP = "profiling", "profiling"
    HELP = {"scale": "smoke | cpu | gpu",
            "model": "BERT preset built from config when notebook 02 saved no model",
            "vocab_size": "vocabulary of that model (tokens)",
            "profile_steps": "steps recorded by torch.profiler",
            "bench_sizes": "square matmul sizes n (n x n @ n x n) for the TFLOP/s table",
            "seq_len": "tokens per sequence of the timed steps",
            "batch_size": "sequences per timed step",
            "timing_steps": "timed steps per measurement, after warm-up",
            "warmup_steps": "untimed steps before each measurement",
            "sdpa_batch": "attention benchmark batch", "sdpa_heads": "attention benchmark heads (64 dims each)",
            "h2d_mib": "host-to-device copy size (MiB)",
            "worker_values": "DataLoader workers compared", "compile_values": "torch.compile off/on compared",
            "sdpa_seq_lens": "attention lengths compared (tokens)",
            "init": "the model to time: a model folder; None: notebook 02's at this scale, else built from config"}

    def model_dir(self) -> Path | None:
        """The checkpoint to time: ``init``, else notebook 02's ``runs/<scale>/mlm/model`` if saved, else None."""
        if self.init is not None:
            return Path(self.init)
        from nbkit.recipes.finetuning import default_encoder

        return default_encoder(self.scale)

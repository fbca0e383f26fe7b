"""The training loop (``loop.Loop``) and its parts: config, checks, checkpoints, batching, precision,
optimizer, callbacks, DDP. It knows nothing about Jupyter: views subscribe through callbacks."""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.train.callbacks import Callback, EarlyStopping, ProgressLine, TensorBoardLogger, TrainerBridge
    from nbkit.train.config import TrainConfig, TrainResult, TrainState
    from nbkit.train.loop import Loop, TrainingInterrupted
    from nbkit.train.loss import token_loss_sum

__getattr__, __dir__ = lazy_exports(__name__, __file__)

"""The training loop and its parts: config, checks, evaluation, checkpoints, batching,
precision, optimizer, callbacks, DDP and the torchrun launcher.

The loop (``loop.Loop``) knows nothing about Jupyter: views subscribe through callbacks.
"""
from nbkit._lazy import lazy_exports, names

__getattr__, __dir__ = lazy_exports(__name__, {
    **names('loop', 'Loop'),
    **names('config', 'TrainConfig', 'TrainResult', 'TrainState'),
    **names('loss', 'token_loss_sum'),
    **names('callbacks', 'Callback', 'TrainerBridge'),
    **names('early_stopping', 'EarlyStopping'),
})

from loop_helpers import mlm_collate, tiny_mlm, token_data

from nbkit.train import Loop, TrainConfig
from nbkit.train.callbacks import Callback, TrainerBridge
from nbkit.views.plots import LivePlot


class Recorder(Callback):
    def __init__(self):
        self.events = []

    def on_train_begin(self, loop):
        self.events.append(("begin", loop.state.step))

    def on_log(self, loop, logs):
        self.events.append(("log", logs["step"]))

    def on_evaluate(self, loop, metrics):
        self.events.append(("eval", loop.state.step))

    def on_save(self, loop, path):
        self.events.append(("save", path.name))

    def on_train_end(self, loop, result):
        self.events.append(("end", result.metrics["steps"]))


def test_loop_calls_callbacks_in_order_and_feeds_live_plot(tmp_path):
    rec, plot = Recorder(), LivePlot(mode="none")
    cfg = TrainConfig(max_steps=4, batch_size=4, log_every=2, eval_every=4, checkpoint_every=4,
                      output_dir=tmp_path, progress=False, precision="fp32")
    Loop(tiny_mlm(), cfg, token_data(), eval_data=token_data(8, seed=1), collate_fn=mlm_collate,
         callbacks=[rec, plot]).fit()
    assert rec.events == [("begin", 0), ("log", 2), ("log", 4), ("eval", 4), ("save", "step-000004"), ("end", 4)]
    assert plot.series["loss"].x == [2.0, 4.0] and plot.series["eval_loss"].x == [4.0]
    assert plot.closed and (tmp_path / "loss.png").is_file()


class Monitor:
    def __init__(self):
        self.records = []

    def record(self, step, metrics):
        self.records.append((step, dict(metrics)))


def test_trainer_bridge_feeds_live_plot_and_monitor_from_transformers_trainer(tmp_path):
    from transformers import Trainer, TrainingArguments

    plot, monitor = LivePlot(mode="none"), Monitor()
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=4,
                             logging_steps=2, eval_strategy="steps", eval_steps=4, save_strategy="no",
                             report_to=[], use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
    data = [mlm_collate([e]) for e in token_data(16)]
    data = [{k: v[0] for k, v in d.items()} for d in data]
    trainer = Trainer(model=tiny_mlm(), args=args, train_dataset=data, eval_dataset=data[:4],
                      callbacks=[TrainerBridge(live_plot=plot, monitor=monitor)])
    trainer.train()
    assert plot.series["loss"].x == [2.0, 4.0]
    assert plot.series["eval_loss"].x == [4.0]
    assert "lr" in plot.series and plot.last["samples_per_s"] > 0
    steps = [s for s, _ in monitor.records]
    assert steps == [2, 4, 4] and "eval_loss" in monitor.records[-1][1]
    assert plot.closed and (tmp_path / "loss.png").is_file()

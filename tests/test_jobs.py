"""The job scripts run notebook 02's pretraining in one process at smoke scale."""
from __future__ import annotations

import json

import pytest

from nbkit.jobs.launch import parse_metrics_line


@pytest.mark.slow  # over 5 s on 2 cores (scripts/test.sh --fast leaves it out)
def test_pretrain_job_smoke_writes_model_metrics_and_metrics_lines(runs_tmp, tmp_path, capsys):
    from nbkit.jobs import pretrain

    out = tmp_path / "mlm"
    assert pretrain.main(["--scale", "smoke", "--max-steps", "2", "--log-every", "1",
                          "--output-dir", str(out)]) == 0
    lines = [m for m in map(parse_metrics_line, capsys.readouterr().out.splitlines()) if m]
    assert [m["step"] for m in lines if "loss" in m] == [1, 2]
    assert [m["step"] for m in lines if "eval_loss" in m] == [2]            # the final evaluation
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 2 and metrics["world_size"] == 1 and metrics["scale"] == "smoke"
    assert metrics["eval_loss"] > 0 and (out / "model" / "config.json").is_file()
    assert (out / "checkpoints" / "step-000002" / "COMPLETE").is_file()
    assert (runs_tmp / "smoke" / "tokenizer" / "tokenizer.json").is_file()  # trained on the way

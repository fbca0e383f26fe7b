"""The engines' contracts on loopback: two "nodes" (processes on 127.0.0.1), each started with the command its
rendered manifest holds and exactly the variables the engine sets on a node, join one gloo group and train the
steps a 2-process torchrun run trains (tests/ddp_loop_job.py: the real Loop, a tiny BERT), to the same parameters.

What each engine sets, from its source: Kubeflow training-operator v1.9 ``pkg/controller.v1/pytorch/envvar.go``
and ``master.go`` (PyTorchJob), trainer v2.3 ``pkg/runtime/framework/plugins/torch/torch.go`` (TrainJob), SkyPilot's
``SKYPILOT_*`` (its multi-node docs). The manifests' host names (``<job>-master-0``, ``<job>-node-0-0.<job>``)
become 127.0.0.1 and the port a free one; nothing else is changed. A real cluster was not run.
"""
from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from nbkit.errors import ConfigError
from nbkit.jobs import cluster as C
from tests.waiting import GENEROUS_S

REPO = Path(__file__).resolve().parents[1]
JOB = str(Path(__file__).with_name("ddp_loop_job.py"))
JOB_MODULE = "tests.ddp_loop_job"   # the manifests' form, -m module, run from the repository root
pytestmark = pytest.mark.multiproc
DIST_VARS = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NBKIT_DISTRIBUTED",
             "TORCHELASTIC_RUN_ID", *C.PET_VARS, *C.SKYPILOT_VARS)


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def base_env() -> dict:
    """This machine's environment without any launcher's variables, CPU only, nbkit importable."""
    env = {k: v for k, v in os.environ.items() if k not in DIST_VARS}
    env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), env.get("PYTHONPATH")) if p), NBKIT_DIST_TIMEOUT_S="120",
        PATH=os.pathsep.join((str(Path(sys.executable).parent), env.get("PATH", ""))))
    return env


def manifest_env(entries: list[dict]) -> dict:
    return {e["name"]: e["value"] for e in entries}


def engine(kind: str, out: Path, port: int) -> list[tuple[list[str], dict]]:
    """(command, environment) of each of 2 nodes for ``kind``: the rendered manifest's command and env, plus what
    the engine sets on node i."""
    args = [str(out), "--batch-size", "4"]
    nodes = []
    for i in range(2):
        if kind == "trainjob":
            doc = C.trainjob(args, job=JOB_MODULE, nodes=2, gpus_per_node=0)
            tr = doc["spec"]["trainer"]
            cmd, env = tr["command"], manifest_env(tr["env"])
            env.update(PET_NNODES="2", PET_NPROC_PER_NODE=str(tr["numProcPerNode"]), PET_NODE_RANK=str(i),
                       PET_MASTER_ADDR="127.0.0.1", PET_MASTER_PORT=str(port))   # torch.go: <job>-node-0-0.<job>:29500
        elif kind.startswith("pytorchjob"):
            torchrun = kind == "pytorchjob"
            doc = C.pytorchjob(args, job=JOB_MODULE, nodes=2, gpus_per_node=0 if torchrun else 1, torchrun=torchrun)
            replica = "Master" if i == 0 else "Worker"
            container = doc["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"]["containers"][0]
            cmd, env = container["command"], manifest_env(container["env"])
            nproc = doc["spec"].get("nprocPerNode", "auto")                    # the operator's default: auto
            world = 2 * (int(nproc) if nproc.isdigit() else 1)                   # envvar.go: replicas x nproc
            env.update(PYTHONUNBUFFERED="1", MASTER_PORT=str(port), PET_MASTER_PORT=str(port),
                       MASTER_ADDR="127.0.0.1", PET_MASTER_ADDR="127.0.0.1",  # master.go: <job>-master-0
                       WORLD_SIZE=str(world), RANK=str(i), PET_NODE_RANK=str(i), PET_NPROC_PER_NODE=nproc,
                       PET_NNODES="2")
        else:
            task = C.skypilot_task(args, job=JOB_MODULE, nodes=2, gpus_per_node=0)
            cmd, env = ["bash", "-c", task["run"]], dict(task["envs"])
            env.update(SKYPILOT_NODE_IPS="127.0.0.1\n127.0.0.1\n", SKYPILOT_NODE_RANK=str(i),
                       SKYPILOT_NUM_NODES="2", SKYPILOT_NUM_GPUS_PER_NODE="0", NBKIT_MASTER_PORT=str(port))
        nodes.append(([sys.executable, *cmd[1:]] if cmd[0] == "python" else cmd, env))
    return nodes


def run_nodes(nodes, timeout: float = GENEROUS_S) -> list[subprocess.CompletedProcess]:
    procs = [subprocess.Popen(cmd, env={**base_env(), **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, cwd=REPO) for cmd, env in nodes]
    try:
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [subprocess.CompletedProcess(p.args, p.returncode, out) for p, out in zip(procs, outs)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The same job under a plain 2-process torchrun on one machine (nbkit.jobs.launch)."""
    from nbkit.jobs.launch import launch

    out = tmp_path_factory.mktemp("torchrun")
    job = launch(JOB, nproc_per_node=2, args=[str(out), "--batch-size", "4"], device="cpu", show=False,
                 env={"OMP_NUM_THREADS": "1"})
    assert job.wait() == 0, "\n".join(job.lines)
    return torch.load(out / "params.pt")


@pytest.mark.parametrize("kind", ["trainjob", "pytorchjob", "pytorchjob-no-torchrun", "skypilot"])
def test_two_nodes_with_the_engines_variables_train_what_torchrun_trains(kind, reference, tmp_path):
    results = run_nodes(engine(kind, tmp_path, free_port()))
    for r in results:
        assert r.returncode == 0, f"{shlex.join(r.args)}\n{r.stdout[-3000:]}"
    got = torch.load(tmp_path / "params.pt")
    assert got.keys() == reference.keys()
    for k in got:     # the same ranks see the same shards in the same order: the same numbers, not just close
        torch.testing.assert_close(got[k], reference[k], rtol=0, atol=0, msg=f"{kind}: parameter {k} differs")
    metrics = [line for line in results[0].stdout.splitlines() if "NBKIT_METRICS" in line and '"loss"' in line]
    assert len(metrics) == 4 and not any("NBKIT_METRICS" in line for line in results[1].stdout.splitlines())


@pytest.mark.parametrize("kind, drop, named", [("trainjob", "PET_NNODES", "PET_NNODES is not set"),
                                                ("skypilot", "SKYPILOT_NUM_NODES", "SKYPILOT_NUM_NODES is not set")])
def test_a_missing_variable_stops_the_node_before_torchrun(kind, drop, named, tmp_path):
    """What used to be a node training alone (torchrun's --nnodes defaults to 1) or an empty --nnodes."""
    cmd, env = engine(kind, tmp_path, free_port())[1]
    env.pop(drop)
    t0 = time.monotonic()
    r = run_nodes([(cmd, env)])[0]
    assert r.returncode == 2 and named in r.stdout and "Traceback" not in r.stdout
    assert "NBKIT_METRICS" not in r.stdout and not (tmp_path / "params.pt").exists()
    assert time.monotonic() - t0 < GENEROUS_S


def test_a_node_that_cannot_reach_the_master_names_address_and_port():
    """Nobody listens on the port: node rank 1 gives up after the timeout set, naming where it knocked."""
    port = free_port()
    place = C.check_env("pet", {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": "1",
                                "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": str(port)})
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as err:
        C.wait_for_master(place, 2.0, "PET_MASTER_ADDR:PET_MASTER_PORT")
    took = time.monotonic() - t0
    msg = str(err.value)
    assert f"could not reach the master at 127.0.0.1:{port} (PET_MASTER_ADDR:PET_MASTER_PORT) within 2 s" in msg
    assert "NBKIT_DIST_TIMEOUT_S" in msg and 1.5 < took < GENEROUS_S
    C.wait_for_master({**place, "node_rank": 0}, 2.0, "")      # the master itself does not wait


def test_the_skypilot_run_line_is_what_the_committed_task_runs():
    """The contract above ran the renderer's run: line; the committed task's is the same line for the real job."""
    task = yaml.safe_load((REPO / "deploy/skypilot/pretrain.yaml").read_text())
    assert task["run"] == C.skypilot_task(["--scale", "gpu"])["run"]
    assert "python -m nbkit.jobs.cluster --from skypilot -m nbkit.jobs.pretrain --scale gpu" in task["run"]

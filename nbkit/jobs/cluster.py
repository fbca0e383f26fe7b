"""Clusters as users have them: the manifest of a job for Kubeflow (``PyTorchJob``, Trainer v2 ``TrainJob``) or
SkyPilot, and ``python -m nbkit.jobs.cluster --from pet|skypilot JOB [flags]``, which checks the variables the
engine set before torchrun reads them.

Kubeflow's operators set torchrun's own ``PET_*`` variables; SkyPilot's ``SKYPILOT_*`` ones become torchrun flags
here. A missing or wrong one is a ``ConfigError`` naming it before torchrun starts (not a node that trains alone
or a rendezvous that hangs), and a node that cannot reach the master within ``NBKIT_DIST_TIMEOUT_S`` names the
address and port it tried. The manifests run the job through this entry, with the run folder on a persistent
volume and ``/dev/shm`` as memory (``docs/distributed.md``, "Clusters").
"""
from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

from nbkit.errors import ConfigError

#: The variables Kubeflow's PyTorchJob (training-operator v1.9, ``pkg/controller.v1/pytorch/envvar.go``) and
#: TrainJob (trainer v2.3, ``pkg/runtime/framework/plugins/torch/torch.go``) set for torchrun.
PET_VARS = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
#: What SkyPilot sets on every node of a ``num_nodes`` task (its docs, "Distributed multi-node jobs").
SKYPILOT_VARS = ("SKYPILOT_NODE_IPS", "SKYPILOT_NODE_RANK", "SKYPILOT_NUM_NODES", "SKYPILOT_NUM_GPUS_PER_NODE")
SOURCES = {"pet": PET_VARS, "skypilot": SKYPILOT_VARS}
#: The master port a SkyPilot job uses (SkyPilot sets none); Kubeflow's come in PET_MASTER_PORT.
DEFAULT_PORT = 29500

IMAGE = "nbkit:2.9-cuda12.8"          # docker/compose.yaml's tag; push it where the cluster pulls from
RUNS = "/home/jovyan/runs"            # the image's NBKIT_RUNS_DIR
KINDS = ("pytorchjob", "trainjob", "skypilot")
SUBMIT = {"pytorchjob": "kubectl apply -f {path}", "trainjob": "kubectl apply -f {path}",
          "skypilot": "sky launch -c {name} {path}"}
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


# ----- the engines' variables ------------------------------------------------------------------------------------
def _int(env, name: str, low: int, high: int | None = None, what: str = "") -> int:
    raw = env.get(name, "")
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise ConfigError(f"{name}={raw!r}: expected a whole number {bound}{what}; the cluster engine sets it "
                          "for every node: check the manifest's node count and that the job runs under that engine")
    return value


def check_env(source: str, env=None) -> dict:
    """The place of this node in the job, read from the variables engine ``source`` sets (``"pet"``: Kubeflow
    PyTorchJob/TrainJob; ``"skypilot"``), checked: ``{"nnodes", "nproc_per_node", "node_rank", "master_addr",
    "master_port"}`` (``nproc_per_node`` an int, or ``"auto"``/``"gpu"``/``"cpu"`` as torchrun takes it).

    A SkyPilot node without GPUs (``SKYPILOT_NUM_GPUS_PER_NODE=0``) runs one process (gloo); its master is the
    first of ``SKYPILOT_NODE_IPS`` and the port ``NBKIT_MASTER_PORT`` or :data:`DEFAULT_PORT`.

    Raises:
        ConfigError: an unknown ``source``; a variable missing (all missing ones named, with the engine), not a
            number, or out of range (rank >= nodes, a node count that disagrees with the list of addresses).
    """
    env = os.environ if env is None else env
    if source not in SOURCES:
        raise ConfigError(f"--from {source!r}: use one of {', '.join(SOURCES)}")
    missing = [k for k in SOURCES[source] if not env.get(k, "").strip()]
    if missing:
        who = "Kubeflow's PyTorchJob/TrainJob" if source == "pet" else "SkyPilot"
        raise ConfigError(
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set, but --from {source} reads "
            f"{', '.join(SOURCES[source])}, which {who} sets on every node. Fix: run the job under {who} (a "
            f"manifest from nbkit.jobs.cluster.write_manifest), or set the missing variables; for one machine "
            "use `python -m nbkit.jobs.launch --standalone --nproc-per-node=N ...` instead.")
    if source == "pet":
        nnodes = _int(env, "PET_NNODES", 1)
        rank = _int(env, "PET_NODE_RANK", 0, nnodes - 1, f" (PET_NNODES={nnodes})")
        raw = env["PET_NPROC_PER_NODE"].strip()
        nproc = raw if raw in ("auto", "gpu", "cpu") else _int(env, "PET_NPROC_PER_NODE", 1, what=" or auto")
        addr, port = env["PET_MASTER_ADDR"].strip(), _int(env, "PET_MASTER_PORT", 1, 65535)
    else:
        nnodes = _int(env, "SKYPILOT_NUM_NODES", 1)
        ips = env["SKYPILOT_NODE_IPS"].split()
        if len(ips) != nnodes:
            raise ConfigError(f"SKYPILOT_NODE_IPS lists {len(ips)} address(es) ({', '.join(ips)}) but "
                              f"SKYPILOT_NUM_NODES={nnodes}; both come from SkyPilot for the same task: run the "
                              "job under `sky launch` rather than setting them by hand")
        rank = _int(env, "SKYPILOT_NODE_RANK", 0, nnodes - 1, f" (SKYPILOT_NUM_NODES={nnodes})")
        nproc = _int(env, "SKYPILOT_NUM_GPUS_PER_NODE", 0) or 1
        addr = ips[0]
        port = _int(env, "NBKIT_MASTER_PORT", 1, 65535) if env.get("NBKIT_MASTER_PORT") else DEFAULT_PORT
    return {"nnodes": nnodes, "nproc_per_node": nproc, "node_rank": rank, "master_addr": addr, "master_port": port}


def torchrun_flags(source: str, place: dict) -> list[str]:
    """The torchrun flags for ``place`` (:func:`check_env`): none for ``"pet"`` (torchrun reads the ``PET_*``
    variables itself, as under a bare ``torchrun``), the static rendezvous flags for ``"skypilot"``."""
    if source == "pet":
        return []
    return [f"--nnodes={place['nnodes']}", f"--nproc-per-node={place['nproc_per_node']}",
            f"--node-rank={place['node_rank']}", f"--master-addr={place['master_addr']}",
            f"--master-port={place['master_port']}"]


def wait_for_master(place: dict, timeout_s: float, names: str) -> None:
    """On a node of rank > 0, connect to the master's rendezvous port as a store client until it answers or
    ``timeout_s`` s pass (at once on rank 0, which hosts it), rather than torchrun's 10 minutes. ``names``: how
    the address was given, for the message.

    Raises:
        ConfigError: the master did not answer in time; names the address and port tried and the fixes.
    """
    if place["node_rank"] == 0 or place["nnodes"] == 1:
        return
    from datetime import timedelta

    import torch.distributed as dist

    where = f"{place['master_addr']}:{place['master_port']}"
    try:
        store = dist.TCPStore(place["master_addr"], int(place["master_port"]), is_master=False,
                              timeout=timedelta(seconds=timeout_s), wait_for_workers=False)
    except (RuntimeError, ValueError) as err:   # DistNetworkError, DistStoreError: refused, unknown host, timeout
        raise ConfigError(
            f"node rank {place['node_rank']} of {place['nnodes']} could not reach the master at {where} ({names}) "
            f"within {timeout_s:g} s ({str(err).splitlines()[0][:200]}). Fix: check that node 0 started and that "
            f"this node resolves and reaches {place['master_addr']} on port {place['master_port']} (a Kubernetes "
            "job needs its headless service, a NetworkPolicy or sidecar may block it); raise NBKIT_DIST_TIMEOUT_S "
            "when nodes start slowly.") from None
    del store


USAGE = ("usage: python -m nbkit.jobs.cluster --from pet|skypilot (-m module | script.py) [job flags]\n"
         "  pet: Kubeflow PyTorchJob/TrainJob (torchrun reads PET_*); skypilot: the SKYPILOT_* variables")


def main(argv: list[str] | None = None) -> int:
    """``python -m nbkit.jobs.cluster --from pet|skypilot JOB [flags]``: check the engine's variables
    (:func:`check_env`), wait for the master on other nodes (:func:`wait_for_master`), then run ``JOB``
    (``-m module`` or a script) under torchrun (:func:`nbkit.jobs.launch.main`). Returns its exit code; 2 with one
    line naming the variable when one is missing or wrong. (Parsed by hand: argparse cannot leave
    ``-m module --flags`` to the job.)"""
    from nbkit.train.ddp.rendezvous import timeout_s

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if argv[:1] == ["--from"] and len(argv) > 1:
        source, job = argv[1], argv[2:]
    elif argv[:1] and argv[0].startswith("--from="):
        source, job = argv[0].split("=", 1)[1], argv[1:]
    else:
        source, job = None, []
    if source not in SOURCES or not job:
        print(f"{USAGE}\nnbkit.jobs.cluster: error: give --from {'|'.join(SOURCES)} and the job (-m nbkit.jobs.pretrain "
              f"[flags]); got {' '.join(argv) or 'nothing'}", file=sys.stderr, flush=True)
        return 2
    try:
        place = check_env(source)
        names = ("PET_MASTER_ADDR:PET_MASTER_PORT" if source == "pet"
                 else "the first of SKYPILOT_NODE_IPS, port NBKIT_MASTER_PORT")
        wait_for_master(place, timeout_s(), names)
    except ConfigError as exc:
        print(f"nbkit.jobs.cluster: error: {exc}", file=sys.stderr, flush=True)
        return 2
    from nbkit.jobs.launch import main as torchrun

    return torchrun([*torchrun_flags(source, place), *job])


# ----- the manifests ---------------------------------------------------------------------------------------------
def job_args(cfg, job: str = "nbkit.jobs.pretrain") -> list[str]:
    """The job's flags for the run a notebook configured: ``--scale`` and one flag per field ``cfg`` (a
    :class:`~nbkit.recipes.pretraining.PretrainConfig` or a fine-tuning config) changed from its scale's recipe,
    spelled as ``python -m <job>`` takes them, so the cluster run trains what the notebook would.

    Raises:
        ConfigError: a changed field no flag can carry (an in-memory dataset as ``corpus``, the bundled ``mix``).
    """
    import importlib

    skip = set(getattr(importlib.import_module(job), "SKIP", ())) - {"progress"}
    out = ["--scale", cfg.scale]
    for name, value in cfg.overrides().items():
        if name in ("progress", "scale"):
            continue
        if name in skip or not isinstance(value, (str, int, float, bool, type(None), list, tuple)):
            raise ConfigError(f"{name}={value!r} cannot be passed to `python -m {job}` as a flag; give the job a "
                              "path (a corpus on the shared volume) or leave the field at its recipe value")
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            out += [flag, "yes" if value else "no"]
        elif value is None:
            out += [flag, "all" if name in getattr(cfg, "ALL_MEANS_NONE", ()) else "none"]
        elif isinstance(value, (list, tuple)):
            out += [flag, *map(str, value)]
        else:
            out += [flag, str(value)]
    return out


def _check(name: str, nodes: int, gpus_per_node: int) -> None:
    if not (len(name) <= 63 and _NAME.fullmatch(name)):
        raise ConfigError(f"name={name!r}: a Kubernetes name is lower-case letters, digits and '-', at most 63 "
                          "characters, starting and ending with a letter or digit (e.g. 'nbkit-pretrain')")
    if int(nodes) < 1 or int(gpus_per_node) < 0:
        raise ConfigError(f"nodes={nodes}, gpus_per_node={gpus_per_node}: use nodes >= 1 and gpus_per_node >= 0 "
                          "(0: CPU nodes, one gloo process each)")


def _command(job: str, args, source: str | None) -> list[str]:
    entry = [job] if job.endswith(".py") else ["-m", job]
    head = ["python", "-m", "nbkit.jobs.cluster", "--from", source] if source else ["python"]
    return [*head, *entry, *map(str, args)]


def _env(extra: dict | None) -> list[dict]:
    base = {"NBKIT_RUNS_DIR": RUNS, "HF_HUB_OFFLINE": "1", **(extra or {})}
    return [{"name": k, "value": str(v)} for k, v in base.items()]


def _resources(gpus: int, cpu: int, memory: str) -> dict:
    gpu = {"nvidia.com/gpu": str(gpus)} if gpus else {}   # GPUs: requests must equal limits
    return {"requests": {"cpu": str(cpu), "memory": memory, **gpu}, "limits": {"memory": memory, **gpu}}


def _volumes(pvc: str, shm_size: str) -> list[dict]:
    # /dev/shm: a pod's default is 64 MiB, where DataLoader workers die with a bus error (pytorch#108861)
    return [{"name": "runs", "persistentVolumeClaim": {"claimName": pvc}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}}]


MOUNTS = [{"name": "runs", "mountPath": RUNS}, {"name": "dshm", "mountPath": "/dev/shm"}]
# Istio's sidecar would keep a finished pod running and block the rendezvous port until it is ready
POD_ANNOTATIONS = {"sidecar.istio.io/inject": "false"}


def pytorchjob(args=(), job: str = "nbkit.jobs.pretrain", name: str = "nbkit-pretrain", image: str = IMAGE,
               nodes: int = 2, gpus_per_node: int = 8, pvc: str = "nbkit-runs", shm_size: str = "16Gi",
               cpu: int = 16, memory: str = "64Gi", torchrun: bool = True, env: dict | None = None) -> dict:
    """A Kubeflow ``PyTorchJob`` (``kubeflow.org/v1``, training-operator v1.9) as a dict: one Master and
    ``nodes - 1`` Workers, each a pod of ``gpus_per_node`` GPUs running ``job`` with ``args``.

    Every pod runs the image's job entry (not JupyterLab), mounts the ReadWriteMany claim ``pvc`` at the image's
    runs folder and a memory ``emptyDir`` of ``shm_size`` at ``/dev/shm``. ``torchrun``: one process per GPU
    from the operator's ``PET_*``; ``False``: one process per pod (``gpus_per_node`` <= 1) joining through the
    operator's ``MASTER_ADDR``, ``RANK``, ``WORLD_SIZE``. ``cpu`` (cores) and ``memory`` are requested per pod.

    Raises:
        ConfigError: a name Kubernetes refuses; nodes < 1; ``torchrun=False`` with more than one GPU per pod.
    """
    _check(name, nodes, gpus_per_node)
    if not torchrun and gpus_per_node > 1:
        raise ConfigError(f"torchrun=False runs one process per pod, but gpus_per_node={gpus_per_node}; keep "
                          "torchrun=True (one process per GPU) or use gpus_per_node=1")
    extra = dict(env or {})
    if not torchrun:   # the operator sets RANK/WORLD_SIZE/MASTER_*, no LOCAL_RANK: one process per pod
        extra = {"NBKIT_DISTRIBUTED": "1", "LOCAL_RANK": "0", **extra}
    pod = {"metadata": {"annotations": dict(POD_ANNOTATIONS)},
           "spec": {"securityContext": {"fsGroup": 100},   # the image's group: the volume is writable by its user
                    "containers": [{
                        "name": "pytorch",                    # the name the operator looks for
                        "image": image,
                        "command": _command(job, args, "pet" if torchrun else None),
                        "env": _env(extra),
                        "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
                        "resources": _resources(gpus_per_node, cpu, memory),
                        "volumeMounts": [dict(m) for m in MOUNTS]}],
                    "volumes": _volumes(pvc, shm_size)}}
    replicas = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": pod}}
    if nodes > 1:
        import copy

        replicas["Worker"] = {"replicas": int(nodes) - 1, "restartPolicy": "OnFailure", "template": copy.deepcopy(pod)}
    spec = {"runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 3}, "pytorchReplicaSpecs": replicas}
    if torchrun:
        spec = {"nprocPerNode": str(max(1, gpus_per_node)), **spec}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}, "spec": spec}


def trainjob(args=(), job: str = "nbkit.jobs.pretrain", name: str = "nbkit-pretrain", image: str = IMAGE,
             nodes: int = 2, gpus_per_node: int = 8, pvc: str = "nbkit-runs", shm_size: str = "16Gi",
             cpu: int = 16, memory: str = "64Gi", runtime: str = "torch-distributed", env: dict | None = None) -> dict:
    """A Kubeflow Trainer v2 ``TrainJob`` (``trainer.kubeflow.org/v1alpha1``, trainer v2.3) on the
    ``runtime`` ClusterTrainingRuntime: ``nodes`` x ``gpus_per_node``, the same pod as :func:`pytorchjob`
    through ``runtimePatches``; the Torch plugin sets ``PET_*``, which ``--from pet`` hands to torchrun.

    Raises:
        ConfigError: a name Kubernetes refuses; nodes < 1.
    """
    _check(name, nodes, gpus_per_node)
    pod = {"metadata": {"annotations": dict(POD_ANNOTATIONS)},
           "spec": {"securityContext": {"fsGroup": 100}, "volumes": _volumes(pvc, shm_size),
                    "containers": [{"name": "node", "volumeMounts": [dict(m) for m in MOUNTS]}]}}
    patch = {"manager": "nbkit.jobs.cluster", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": pod}}}]}}}}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": runtime},
                     "trainer": {"image": image, "command": _command(job, args, "pet"),
                                 "numNodes": int(nodes), "numProcPerNode": max(1, int(gpus_per_node)),
                                 "resourcesPerNode": _resources(gpus_per_node, cpu, memory), "env": _env(env)},
                     "runtimePatches": [patch]}}


def skypilot_task(args=(), job: str = "nbkit.jobs.pretrain", name: str = "nbkit-pretrain", image: str = IMAGE,
                  nodes: int = 2, gpus_per_node: int = 8, accelerator: str = "H100", volume: str = "nbkit-runs",
                  cpu: int = 16, memory: int = 64, env: dict | None = None) -> dict:
    """A SkyPilot task (``sky launch``): ``nodes`` nodes of ``gpus_per_node`` ``accelerator`` GPUs (CPU nodes
    with 0), at least ``cpu`` cores and ``memory`` GiB each, the image as its container, the SkyPilot volume
    ``volume`` (create it first: ``sky volumes apply``) at the runs folder, and a ``run:`` line that hands
    ``SKYPILOT_*`` to torchrun through ``python -m nbkit.jobs.cluster --from skypilot``.

    Raises:
        ConfigError: a name SkyPilot (Kubernetes-style) refuses; nodes < 1.
    """
    _check(name, nodes, gpus_per_node)
    resources = {"image_id": f"docker:{image}", "cpus": f"{cpu}+", "memory": f"{memory}+"}
    if gpus_per_node:
        resources["accelerators"] = f"{accelerator}:{int(gpus_per_node)}"
    run = " ".join(shlex.quote(w) for w in _command(job, args, "skypilot"))
    return {"name": name, "num_nodes": int(nodes), "resources": resources,
            "envs": {e["name"]: e["value"] for e in _env(env)},
            "volumes": {RUNS: volume}, "run": f"set -e\n{run}\n"}


RENDER = {"pytorchjob": pytorchjob, "trainjob": trainjob, "skypilot": skypilot_task}


def render(kind: str, args=(), **options) -> str:
    """The manifest of ``kind`` (:data:`KINDS`) as YAML text, with a comment line saying how to submit it.

    Raises:
        ConfigError: an unknown kind or option, or what the renderer raises.
    """
    import yaml

    if kind not in RENDER:
        raise ConfigError(f"kind={kind!r}: use one of {', '.join(KINDS)}")
    try:
        doc = RENDER[kind](args, **options)
    except TypeError as err:
        raise ConfigError(f"{kind}: {err}; the options are those of nbkit.jobs.cluster.{RENDER[kind].__name__}") from None
    class Dumper(yaml.SafeDumper):   # multi-line strings (SkyPilot's run:) as literal blocks
        pass

    def text(dumper, value):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)

    Dumper.add_representer(str, text)
    head = (f"# {doc.get('kind', 'SkyPilot task')} written by nbkit.jobs.cluster (docs/distributed.md, \"Clusters\").\n"
            f"# Submit: {SUBMIT[kind].format(path='<this file>', name=options.get('name', 'nbkit-pretrain'))}\n")
    return head + yaml.dump(doc, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=120)


def write_manifest(path, kind: str, cfg=None, args=(), **options) -> Path:
    """Write the ``kind`` manifest (``"pytorchjob"``, ``"trainjob"``, ``"skypilot"``) for the run ``cfg``
    configured (its flags: :func:`job_args`, then ``args``) to ``path``, and print the command that submits it.

    ``options``: those of :func:`pytorchjob` / :func:`trainjob` / :func:`skypilot_task` (``image``, ``nodes``,
    ``gpus_per_node``, ``name``, ...). Returns the path.

    Raises:
        ConfigError: as :func:`render` and :func:`job_args`.
    """
    flags = [*(job_args(cfg, options.get("job", "nbkit.jobs.pretrain")) if cfg is not None else ()), *map(str, args)]
    text = render(kind, flags, **options)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"{kind} manifest: {path}; submit it with: "
          f"{SUBMIT[kind].format(path=path, name=options.get('name', 'nbkit-pretrain'))}")
    return path


if __name__ == "__main__":
    sys.exit(main())

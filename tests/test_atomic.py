"""D09: one write path (nbkit.atomic) for checkpoints, exports, tokenizers and JSON; a full disk is a
WriteError naming the path, the free space and the size needed, and leaves no temp output behind."""
import errno
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import loop_helpers
import pytest
import torch

from nbkit import atomic, jsonio
from nbkit.errors import CheckpointError, WriteError
from nbkit.train import checkpoint


def _enospc(*_a, **_k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if ".tmp" in p.name or ".old-" in p.name)


def _assert_disk_full_message(err: WriteError, target: Path):
    msg = str(err)
    assert str(target) in msg and "ENOSPC" in msg and "no space left" in msg
    assert "Free space on that file system:" in msg and "needs about" in msg and "MiB" in msg
    assert err.path == target and err.errno == errno.ENOSPC
    # that file system's free space, read a moment earlier (other processes may write in between)
    assert abs(err.free_bytes - shutil.disk_usage(target.parent).free) < 64 << 20
    assert isinstance(err, CheckpointError)  # callers catching CheckpointError keep working


def test_atomic_dir_publishes_only_on_success_and_cleans_up_on_any_error(tmp_path):
    target = tmp_path / "a" / "b"
    with atomic.atomic_dir(target) as tmp:
        (tmp / "x.txt").write_text("one")
        assert not target.exists()                      # invisible until the block ends
    assert (target / "x.txt").read_text() == "one"
    with pytest.raises(KeyError):                       # not a file-system failure: unchanged type
        with atomic.atomic_dir(target) as tmp:
            (tmp / "x.txt").write_text("two")
            raise KeyError("boom")
    assert (target / "x.txt").read_text() == "one" and _leftovers(tmp_path) == []


def test_published_files_get_the_permissions_open_gives_whatever_the_writer_chose(tmp_path):
    """safetensors writes weights 0600: another uid (a container, a colleague) could read config.json but not
    the weights. The one write path gives every file 0o666 & ~umask and every folder 0o777 & ~umask."""
    import os

    old = os.umask(0o027)
    try:
        with atomic.atomic_dir(tmp_path / "model") as tmp:
            (tmp / "sub").mkdir(mode=0o700)
            for name in ("model.safetensors", "sub/x.bin"):
                (tmp / name).write_bytes(b"w")
                os.chmod(tmp / name, 0o600)
        with atomic.atomic_file(tmp_path / "one.json") as tmp:
            tmp.write_text("{}")
            os.chmod(tmp, 0o600)
    finally:
        os.umask(old)
    mode = lambda p: os.stat(p).st_mode & 0o777  # noqa: E731
    assert mode(tmp_path / "model" / "model.safetensors") == mode(tmp_path / "model" / "sub" / "x.bin") == 0o640
    assert mode(tmp_path / "model") == mode(tmp_path / "model" / "sub") == 0o750
    assert mode(tmp_path / "one.json") == 0o640
    assert atomic.current_umask() == old


def test_merge_mode_keeps_other_files_of_the_target(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.md").write_text("mine")
    (tmp_path / "out" / "w.bin").write_text("old")
    with atomic.atomic_dir(tmp_path / "out", replace=False) as tmp:
        (tmp / "w.bin").write_text("new")
        (tmp / "sub").mkdir()
        (tmp / "sub" / "k").write_text("k")
    assert (tmp_path / "out" / "notes.md").read_text() == "mine"
    assert (tmp_path / "out" / "w.bin").read_text() == "new" and (tmp_path / "out" / "sub" / "k").is_file()
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("raised, code", [
    (RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)"), errno.ENOSPC),
    (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534"), errno.ENOSPC),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), errno.EDQUOT),
    (OSError(errno.EROFS, "Read-only file system"), errno.EROFS),
    (ValueError("a bug, not the disk"), None),
])
def test_library_failures_are_classified_by_errno_or_message(raised, code):
    assert atomic.write_failure_errno(raised) == code
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = raised
    assert atomic.write_failure_errno(wrapped) == code


def test_checkpoint_disk_full_in_model_file_leaves_no_temp_and_previous_one_loads(tmp_path, monkeypatch):
    model = loop_helpers.tiny_mlm()
    first = checkpoint.save_checkpoint(tmp_path, 1, model, {"step": 1})

    def half_written_then_full(self, save_directory, **kw):   # safetensors' own error type, not OSError
        Path(save_directory).mkdir(parents=True, exist_ok=True)
        (Path(save_directory) / "model.safetensors").write_bytes(b"\0" * 50_000)
        raise RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(type(model), "save_pretrained", half_written_then_full)
    with pytest.raises(WriteError) as info:
        checkpoint.save_checkpoint(tmp_path, 2, model, {"step": 2})
    target = checkpoint.checkpoints_dir(tmp_path) / "step-000002"
    _assert_disk_full_message(info.value, target)
    # size needed: at least what was written, here the previous checkpoint's size (the estimate)
    assert info.value.needed_bytes >= max(50_000, atomic.tree_bytes(first))
    assert _leftovers(tmp_path) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # no "probably killed while saving": nothing left
        assert checkpoint.load_latest(tmp_path).step == 1


def test_checkpoint_disk_full_in_optimizer_state_and_resume_continues(tmp_path, monkeypatch):
    from nbkit.train import Loop, TrainConfig

    cfg = dict(max_steps=3, batch_size=4, checkpoint_every=1, output_dir=str(tmp_path), progress=False,
               precision="fp32", log_every=1)
    real_save, calls = torch.save, []

    def full_on_second(obj, f, *a, **k):
        calls.append(1)
        if len(calls) == 2:
            f.write(b"partial")
            _enospc()
        return real_save(obj, f, *a, **k)

    monkeypatch.setattr(torch, "save", full_on_second)
    with pytest.raises(WriteError, match="trainer|step-000002"):
        Loop(loop_helpers.tiny_mlm(), TrainConfig(**cfg), loop_helpers.token_data(),
             collate_fn=loop_helpers.mlm_collate).fit()
    monkeypatch.setattr(torch, "save", real_save)
    assert _leftovers(tmp_path) == []
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        result = Loop(loop_helpers.tiny_mlm(), TrainConfig(**cfg), loop_helpers.token_data(),
                      collate_fn=loop_helpers.mlm_collate).fit()
    assert not [w for w in rec if "incomplete checkpoint" in str(w.message)]
    assert result.history and checkpoint.load_latest(tmp_path).step == 3


def test_json_write_full_disk_keeps_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "metrics.json"
    jsonio.write_json(path, {"a": 1})
    monkeypatch.setattr(Path, "write_bytes", _enospc)
    with pytest.raises(WriteError) as info:
        jsonio.write_json(path, {"a": 2})
    _assert_disk_full_message(info.value, path)
    assert jsonio.loads_strict(path.read_text()) == {"a": 1} and sorted(os.listdir(tmp_path)) == ["metrics.json"]


def test_read_only_target_names_the_fix(tmp_path, monkeypatch):
    def read_only(*_a, **_k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(Path, "write_bytes", read_only)
    with pytest.raises(WriteError, match=r"read-only file system \(EROFS\).*writable"):
        jsonio.write_json(tmp_path / "x.json", {})


@pytest.mark.filterwarnings("ignore:the trained vocabulary")
def test_export_and_tokenizer_full_disk_leave_nothing(tmp_path, monkeypatch):
    from nbkit import text
    from nbkit.models.export import export_classifier

    tok = text.train_wordpiece(["今天天气很好", "质量不错，很满意"] * 5, 60, tmp_path / "tok", 32)
    model = loop_helpers.tiny_classifier(vocab_size=len(tok))
    monkeypatch.setattr(type(tok), "save_pretrained", lambda *a, **k: _enospc())
    with pytest.raises(WriteError, match="export"):
        export_classifier(model, tok, tmp_path / "export")
    with pytest.raises(WriteError, match="tokenizer"):
        text.train_wordpiece(["今天天气很好"] * 3, 30, tmp_path / "tok2", 32)
    assert _leftovers(tmp_path) == []
    assert not any((tmp_path / "export").glob("*.safetensors"))   # no half export either


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root for unshare -m + tmpfs")
def test_real_full_tmpfs_checkpoint(tmp_path):
    """On a real 1,500 KiB tmpfs: the first checkpoint fits, a later one does not."""
    mnt, prog = tmp_path / "mnt", tmp_path / "prog.py"
    mnt.mkdir()
    prog.write_text(textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})
        import loop_helpers
        from nbkit.errors import WriteError
        from nbkit.train import checkpoint
        m = loop_helpers.tiny_mlm()
        checkpoint.save_checkpoint({str(mnt)!r}, 1, m, {{"step": 1}})
        try:
            for step in range(2, 10):
                checkpoint.save_checkpoint({str(mnt)!r}, step, m, {{"step": step, "pad": bytes(400_000)}},
                                           keep_last=None)
            print("NO ERROR")
        except WriteError as e:
            print("WRITEERROR", e)
        import os; print("LEFT", sorted(os.listdir({str(mnt)!r} + "/checkpoints")))
    """))
    cmd = f"mount -t tmpfs -o size=1500k tmpfs {mnt} && {sys.executable} {prog}"
    out = subprocess.run(["unshare", "-m", "bash", "-c", cmd], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    if "mount" in out.stderr and out.returncode:
        pytest.skip(f"tmpfs mount not permitted here: {out.stderr.strip()[:200]}")
    assert "WRITEERROR" in out.stdout and "no space left on device (ENOSPC)" in out.stdout, out.stdout + out.stderr
    left = out.stdout.split("LEFT", 1)[1]
    assert ".tmp-" not in left and "step-000001" in left


def test_fsync_dir_skips_a_file_system_that_cannot_fsync_a_folder_but_not_a_failing_disk(tmp_path, monkeypatch):
    from nbkit import atomic

    def fsync_raising(code):
        def fsync(fd):
            raise OSError(code, os.strerror(code))
        return fsync

    monkeypatch.setattr(os, "fsync", fsync_raising(errno.EINVAL))      # e.g. a container bind mount
    atomic.fsync_dir(tmp_path)
    monkeypatch.setattr(os, "fsync", fsync_raising(errno.EIO))
    with pytest.raises(OSError) as err:
        atomic.fsync_dir(tmp_path)
    assert err.value.errno == errno.EIO


def test_read_consistent_reads_a_folder_again_when_a_writer_replaced_it_during_the_read(tmp_path):
    """Issue 52 item 12: a reader in another kernel read config.json of one save and the weights of the next (or
    hit FileNotFoundError). The writer's swap happens inside the first read here (no threads, no sleeps waiting):
    read_consistent sees the folder changed and reads the new version whole; a folder that did not change raises
    the reader's own error; a folder that changes at every read ends in a CheckpointError naming the fix."""
    target = tmp_path / "model"

    def save(version: str) -> None:
        with atomic.atomic_dir(target) as tmp:          # swap: the old folder leaves the name in one rename
            (tmp / "config.json").write_text(version)
            (tmp / "weights.bin").write_text(version)

    save("v1")
    calls = []

    def read(folder: Path):
        config = (folder / "config.json").read_text()
        if not calls:
            save("v2")                                  # the other kernel's rerun saves between the two files
        calls.append(config)
        return config, (folder / "weights.bin").read_text()

    assert atomic.read_consistent(target, read) == ("v2", "v2") and calls == ["v1", "v2"]   # never ("v1", "v2")

    with pytest.raises(FileNotFoundError):
        atomic.read_consistent(target, lambda folder: (folder / "absent.json").read_text())   # its own error

    versions = iter(range(100))

    def always_replaced(folder: Path):
        save(f"v{next(versions)}")
        return (folder / "config.json").read_text()

    with pytest.raises(CheckpointError, match=r"replaced while this folder was read, 20 times.*Fix: wait"):
        atomic.read_consistent(target, always_replaced)


def test_being_replaced_is_true_only_between_the_swaps_two_renames(tmp_path, monkeypatch):
    target = tmp_path / "model"
    target.mkdir()
    seen = []
    real = os.rename

    def rename(src, dst):
        real(src, dst)
        seen.append((Path(src).name, target.exists(), atomic.being_replaced(target)))

    monkeypatch.setattr(atomic.os, "rename", rename)
    with atomic.atomic_dir(target) as tmp:
        (tmp / "f").write_text("x")
    monkeypatch.undo()
    assert seen[0][0] == "model" and seen[0][1:] == (False, True)      # the name is absent: mid-swap
    assert seen[1][1:] == (True, True) and not atomic.being_replaced(target)   # old removed after


def test_load_pretrained_reads_a_run_folder_again_when_another_kernel_replaced_it(tmp_path):
    """Issue 52 item 12, the whole kind: every checkpoint load (notebook 04's model factory, generate on a folder,
    an init) went through load_pretrained without read_consistent, so a rerun saving notebook 02's model/ in
    another kernel gave a FileNotFoundError. Here the first read finds a file gone mid-swap."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from nbkit.models.loading import load_pretrained

    target = tmp_path / "model"
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)

    def save(seed: int) -> BertForMaskedLM:
        torch.manual_seed(seed)
        model = BertForMaskedLM(config)
        with atomic.atomic_dir(target) as tmp:
            model.save_pretrained(tmp)
        return model

    save(1)
    calls = []

    class Racing(BertForMaskedLM):
        @classmethod
        def from_pretrained(cls, path, *args, **kwargs):
            calls.append(path)
            if len(calls) == 1:
                racing.append(save(2))                  # the other kernel's save lands during this read
                raise FileNotFoundError(f"{path}/model.safetensors")
            return super().from_pretrained(path, *args, **kwargs)

    racing: list = []
    loaded, _ = load_pretrained(Racing, target)
    assert len(calls) == 2
    assert torch.equal(loaded.bert.embeddings.word_embeddings.weight, racing[0].bert.embeddings.word_embeddings.weight)
    with pytest.raises(OSError):
        load_pretrained(BertForMaskedLM, tmp_path / "absent")      # a folder never written: the caller's OSError

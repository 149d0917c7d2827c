"""`verify --brax REF` trains the installed brax: its trainer files are compared with the
ref's, by git blob id, and a difference is said in one line and recorded on both sides."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gitfixture import make_repo

from brax_diff.sources.repository import Repository
from brax_diff.verify import trainer_files

TRAINER = {path: f"# {path}: a hand-written stand-in\nVALUE = {i}\n" for i, path in enumerate(trainer_files.TRAINER_FILES)}


def _installed(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_blob_ids_are_gits(tmp_path):
    (tmp_path / "f").write_bytes(b"hello\n")
    expected = subprocess.run(["git", "hash-object", str(tmp_path / "f")], capture_output=True, text=True,
                              check=True).stdout.strip()
    assert trainer_files.git_blob_id(b"hello\n") == expected == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_installed_trainer_against_the_ref(tmp_path):
    shas = make_repo(tmp_path / "brax", [TRAINER, {"brax/training/agents/ppo/losses.py": "VALUE = 'changed'\n"}])
    repository = Repository(tmp_path / "brax", "brax")
    installed = trainer_files.installed_trainer(_installed(tmp_path / "site", TRAINER), version="0.14.2")
    assert installed["version"] == "0.14.2" and None not in installed["files"].values()

    same = trainer_files.compare(installed, trainer_files.ref_trainer(repository.resolve(shas[0])))
    assert same["same"] is True and same["differing"] == [] and trainer_files.notice(same) is None
    assert same["ref"]["commit"] == shas[0] and same["ref"]["files"] == installed["files"]

    moved = trainer_files.compare(installed, trainer_files.ref_trainer(repository.resolve("main")))
    assert moved["same"] is False and moved["differing"] == ["brax/training/agents/ppo/losses.py"]
    assert moved["ref"]["ref"] == "main" and moved["installed"] is installed
    assert trainer_files.notice(moved) == (
        f"the reference trains the installed brax 0.14.2, not the trainer at --brax main ({shas[1][:12]}): "
        "1 of 6 trainer files differ (agents/ppo/losses.py)")

    # a file the installed package lacks differs too
    partial = trainer_files.installed_trainer(
        _installed(tmp_path / "partial", {k: v for k, v in TRAINER.items() if not k.endswith("types.py")}), "0.1")
    assert partial["files"]["brax/training/types.py"] is None
    assert "brax/training/types.py" in trainer_files.compare(partial, same["ref"])["differing"]
    # from --brax-json the ref's files are unknown: said, never assumed equal
    unread = trainer_files.compare(installed, None)
    assert unread["same"] is None and "unknown" in trainer_files.notice(unread)


def test_the_installed_package_is_found_without_importing_it(tmp_path):
    class Spec:
        origin = str(tmp_path / "site" / "brax" / "__init__.py")

    assert trainer_files.installed_root(lambda name: Spec()) == tmp_path / "site"
    assert trainer_files.installed_root(lambda name: None) is None

"""The environment manifest every record carries: versions, git state, no host or user names."""

import getpass
import json
import socket

from hello_gpu.runtime.manifest import environment_manifest, git_state, package_source_sha256


def test_manifest_names_no_host_or_user():
    text = json.dumps(environment_manifest())
    assert socket.gethostname() not in text
    assert f'"{getpass.getuser()}"' not in text


def test_manifest_has_versions_and_source_hash():
    manifest = environment_manifest()
    assert manifest["python"] and manifest["torch"] and manifest["nvrtc"].startswith("nvrtc-")
    assert len(manifest["package_source_sha256"]) == 64
    assert manifest["package_source_sha256"] == package_source_sha256()


def test_git_state_without_a_repository_reads_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HG_GIT_COMMIT", "0123abcd")
    monkeypatch.setenv("HG_GIT_DIRTY", "0")
    assert git_state(tmp_path) == {"commit": "0123abcd", "dirty": False, "source": "environment"}


def test_the_sender_s_commit_wins_over_a_git_folder_in_the_copy(monkeypatch):
    from pathlib import Path
    repo = Path(__file__).resolve().parents[1]
    monkeypatch.delenv("HG_GIT_COMMIT", raising=False)
    assert git_state(repo)["source"] in ("git", "environment")
    monkeypatch.setenv("HG_GIT_COMMIT", "feedface")
    monkeypatch.setenv("HG_GIT_DIRTY", "1")
    assert git_state(repo) == {"commit": "feedface", "dirty": True, "source": "environment"}


def test_manifest_says_whether_float32_matmuls_ran_on_tf32():
    import torch
    assert environment_manifest()["float32_matmul"] == {"allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                                                        "precision": torch.get_float32_matmul_precision()}
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")            # what turns TF32 on for every float32 matmul
        assert environment_manifest()["float32_matmul"] == {"allow_tf32": True, "precision": "high"}
    finally:
        torch.set_float32_matmul_precision(previous)

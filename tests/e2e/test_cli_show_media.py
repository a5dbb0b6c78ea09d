"""``contextfold show`` of a medium (a video, an image, any bytes that are not text) never
decodes its bytes as text: an event citing it names it on one line (media type, size, playing
time when known, content hash), an artifact ref shows that line on a terminal and its bytes as
stored when piped (``show artifact:H > clip.mp4``), and ``--out FILE`` writes the bytes wherever
stdout goes.

Why: ``show`` decoded a stored video as text wherever an event cited it as its payload (a
``FileRead`` of a clip: megabytes of U+FFFD), and refused an artifact's bytes on a terminal
without saying what they were.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from contextfold.api import open_store
from contextfold.domain.events import DocumentBlock, FileRead, UserInput
from tests.cli_runner import cf, on_terminal
from tests.integration.test_media_build import png
from tests.integration.test_stored_media_fold_estimate import _video


def _store(tmp_path: Path) -> tuple[str, str, str, int]:
    """A store whose run ``r`` cites a 90 s video as a file's payload (2) and as a user's block (3)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    clip = _video(90, 300_000)
    with open_store(url) as store:
        ref = store.events.put_artifact(clip, "video/mp4")
        run = store.run("r")
        run.append(UserInput("watch this"), FileRead(path="demo.mp4", artifact=ref),
                   UserInput(content=(DocumentBlock(artifact=ref, media_type="video/mp4"),)))
    return url, ref.hash, clip.hex(), len(clip)


def test_show_of_a_video_artifact_is_one_line_and_out_writes_its_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, digest, clip_hex, size = _store(tmp_path)
    code, screen = on_terminal(monkeypatch, "--store", url, "show", f"artifact:{digest}")
    assert code == 0
    assert screen == (f"artifact:{digest}: video/mp4, {size:,} bytes, 90.0 s, not text "
                      "(--out FILE writes its bytes)\n").encode(), screen[:300]
    piped = subprocess.run([sys.executable, "-m", "contextfold", "--store", url, "show",
                            f"artifact:{digest}"], cwd=tmp_path, capture_output=True, check=True)
    assert piped.stdout.hex() == clip_hex  # piped: as stored (show artifact:H > clip.mp4)
    target = tmp_path / "clip.mp4"
    wrote = cf("--store", url, "show", f"artifact:{digest}", "--out", str(target), cwd=tmp_path)
    assert wrote.returncode == 0 and wrote.stdout == "", wrote.stderr
    assert target.read_bytes().hex() == clip_hex


def test_show_of_an_event_citing_a_video_names_it_and_decodes_nothing(tmp_path: Path) -> None:
    url, digest, _, size = _store(tmp_path)
    # a file's payload (its length not logged) and a user's block (its length logged when appended)
    for ref, line in (("2", f"[artifact video/mp4: artifact:{digest} ({size} bytes), not text]"),
                      ("3", f"[document video/mp4: artifact:{digest} ({size} bytes, 90.0 s)]")):
        out = cf("--store", url, "show", "r", ref, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "\ufffd" not in out.stdout and len(out.stdout) < 300, out.stdout[:300]
        assert line in out.stdout, out.stdout


def test_show_of_an_image_artifact_is_one_line_and_a_text_one_is_its_text(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    image = png((64, 48), seed=3)
    with open_store(url) as store:
        block = store.attach_image(image)
        text = store.events.put_artifact(b"a listing\n", "text/plain")
    assert block.artifact is not None
    code, shot = on_terminal(monkeypatch, "--store", url, "show", f"artifact:{block.artifact.hash}")
    assert code == 0 and shot == (f"artifact:{block.artifact.hash}: image/png, {len(image):,} bytes, not "
                                  "text (--out FILE writes its bytes)\n").encode(), shot
    listing = cf("--store", url, "show", f"artifact:{text.hash}", cwd=tmp_path)
    assert listing.stdout == "a listing\n"


def test_show_help_names_out(tmp_path: Path) -> None:
    out = cf("show", "--help", cwd=tmp_path)
    assert "--out FILE" in out.stdout and "not text" in out.stdout, out.stdout

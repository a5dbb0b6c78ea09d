"""``contextfold show`` of a medium (a video, an image, any bytes that are not text) prints one
line that says what it is (media type, size, playing time when known, content hash), never its
bytes decoded as text; ``--out FILE`` writes the bytes as stored.

Why: ``show`` decoded a stored video as text wherever an event cited it as its payload (a
``FileRead`` of a clip: megabytes of U+FFFD), and piped an artifact's raw bytes to whatever read
its output (a pager, a log, a model's tool): nothing said what they were.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from contextfold.api import open_store
from contextfold.domain.events import DocumentBlock, FileRead, UserInput
from tests.cli_runner import cf
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


def test_show_of_a_video_artifact_is_one_line_and_out_writes_its_bytes(tmp_path: Path) -> None:
    url, digest, clip_hex, size = _store(tmp_path)
    out = cf("--store", url, "show", f"artifact:{digest}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (f"artifact:{digest}: video/mp4, {size:,} bytes, 90.0 s, not text "
                          "(--out FILE writes its bytes)\n"), out.stdout[:300]
    piped = subprocess.run([sys.executable, "-m", "contextfold", "--store", url, "show",
                            f"artifact:{digest}"], cwd=tmp_path, capture_output=True, check=True)
    assert piped.stdout == out.stdout.encode()  # piped too: the line, not the bytes
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


def test_show_of_an_image_artifact_is_one_line_and_a_text_one_is_its_text(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    image = png((64, 48), seed=3)
    with open_store(url) as store:
        block = store.attach_image(image)
        text = store.events.put_artifact(b"a listing\n", "text/plain")
    assert block.artifact is not None
    shot = cf("--store", url, "show", f"artifact:{block.artifact.hash}", cwd=tmp_path)
    assert shot.stdout == (f"artifact:{block.artifact.hash}: image/png, {len(image):,} bytes, not text "
                           "(--out FILE writes its bytes)\n"), shot.stdout
    listing = cf("--store", url, "show", f"artifact:{text.hash}", cwd=tmp_path)
    assert listing.stdout == "a listing\n"


def test_show_help_names_out(tmp_path: Path) -> None:
    out = cf("show", "--help", cwd=tmp_path)
    assert "--out FILE" in out.stdout and "not text" in out.stdout, out.stdout

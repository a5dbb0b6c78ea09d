"""CLI command ``show``: the raw content behind a ref that a mask stub or a summary cites.

Apart from :mod:`contextfold.cli_compact` (where it was) because that module imports compaction
and, with it, the builder: reading an event or an artifact back needs neither (~0.2 s of CPU;
``tests/unit/test_cli_light_imports.py``). Imported when the command runs (``cli.register``).
"""

from __future__ import annotations

import argparse
import sys

from contextfold.audit.text import visible_text
from contextfold.cli import store_for
from contextfold.cli_files import output_file, stdout_is_terminal, write_output_bytes
from contextfold.domain.errors import InvalidInputError
from contextfold.projections.redact_shown import masked
from contextfold.show_refs import (
    FRAGMENT_ID,
    artifact_bytes,
    artifact_media_type,
    artifact_summary,
    artifact_text,
    ref_run,
    show,
)

__all__: list[str] = []


def _handle_show(args: argparse.Namespace) -> int:
    """The content as stored when piped or redirected (a script's, a file's: ``show artifact:H >
    shot.png`` writes the image); on a terminal, its control characters made visible (newlines
    and tabs kept), and an artifact that is not text (an image, a video) one line naming it
    (``show_refs.artifact_summary``): a tool's output is untrusted, and its escapes set the
    terminal's title, cleared its screen or hid what followed, where every other command shows
    them as ``\\x1b``; a video's bytes would be megabytes of them. ``--out FILE`` writes what the
    ref holds to FILE, an artifact's bytes as stored, wherever stdout goes.

    Text (an event's, a text artifact's) has its secrets masked, to stdout and ``--out`` alike,
    unless ``--reveal``: an auditor pastes it into a ticket (``projections.redact_shown``). A
    medium's bytes (an image, a video) are written as stored: no rule reads them."""
    ref = args.ref
    terminal = stdout_is_terminal()
    target = output_file(args.out) if args.out else None
    with store_for(args) as store:
        run_id = args.run if args.run is not None else ref_run(ref, store)
        if run_id is None and FRAGMENT_ID.match(ref.strip()):  # e27 names no run of its own
            raise InvalidInputError(f"a fragment id names an event of one run: show RUN {ref.strip()}")
        if run_id is None or ref.strip().startswith("artifact:"):  # an artifact is the store's
            data = artifact_bytes(store, ref)
            media_type = artifact_media_type(store, ref)
            text = artifact_text(media_type, data)
            raw = args.reveal or text is None  # text is masked (below); a medium's bytes never are
            if raw and (target is not None or (text is None and not terminal)):  # its bytes as stored
                if target is not None:
                    write_output_bytes(target, data)
                else:
                    sys.stdout.flush()
                    sys.stdout.buffer.write(data)
                return 0
            if text is None:
                text = artifact_summary(ref, media_type, data)
        else:
            text = show(store.run(run_id), ref)
    if not args.reveal:  # its secrets as a request holds them: the output goes into tickets
        text = masked(text)
    if target is not None:
        write_output_bytes(target, text.encode("utf-8"))
        return 0
    if terminal:
        text = visible_text(text)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0

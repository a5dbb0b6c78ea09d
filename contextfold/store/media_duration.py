"""How long an audio or video file plays, read from its container's header when it enters the log.

Why: Gemini counts audio and video by their length (32 tokens a second of audio, 263 a second of
video: ``projections.media_cost``), and the build never reads a medium's bytes while it prices
(a stored video is an artifact ref; reading it per build would cost the whole payload). A
duration guessed at pricing time was far off: a stored video priced at a 600 s fallback
(~158,000 tokens) was dropped by every neutral build of a window under ~180k. So the length
is read once, at append (``media.materialize``), and logged in ``DocumentBlock.duration_ms``.

Why hand-written, not a tag library: the few numbers needed sit in fixed places of each
container, and each reader here is a bounded walk (a box, chunk, frame or page count that
cannot exceed the bytes): MP4 / MOV / 3GP (ISO BMFF ``moov/mvhd``: duration / timescale),
WAV (``fmt `` byte rate, ``data`` size), MP3 (every frame header counted: exact for CBR and VBR
alike, no Xing header trusted), Ogg Vorbis / Opus (the last page's granule position over the
sample rate) and native FLAC (STREAMINFO's sample count). Anything else, or bytes that do not
hold together, gives None: the price then falls back to the bound its size allows, as before;
intake never refuses a medium for a length it cannot read.
"""

from __future__ import annotations

import functools
import struct

from contextfold.domain.event_values import media_type_key

__all__ = ["is_timed_media", "media_duration_ms"]

_MAX_BOXES = 4096
"""Boxes (or WAV chunks) read at one level before giving up: a real file has a handful."""
_MAX_OGG_PAGES_BACK = 64
"""Pages searched back from the end for the first stream's last granule position."""
_MP3_TRAILERS = (b"TAG", b"APETAGEX", b"LYRICS200")
"""Tags an MP3 may end with after its last frame (ID3v1, APEv2, Lyrics3)."""


def is_timed_media(media_type: str) -> bool:
    """Whether a block of ``media_type`` is priced by its length (audio or video), whatever the
    case it is spelt in (``audio/MPEG``: RFC 2045's types are case-insensitive)."""
    return media_type_key(media_type).startswith(("audio/", "video/"))


def media_duration_ms(data: bytes) -> int | None:
    """The playing time of ``data`` in whole milliseconds (rounded up), or None when its
    container is not one read here or its header does not hold together (module docstring)."""
    try:
        if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
            return _wav(data)
        if data[:4] == b"OggS":
            return _ogg(data)
        if data[:4] == b"fLaC":
            return _flac(data)
        if data[4:8] in (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip"):
            return _mp4(data)
        if data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
            return _mp3(data)
    except (struct.error, IndexError, ZeroDivisionError):
        return None
    return None


def _ceil_ms(units: int, per_second: int) -> int | None:
    """``units`` at ``per_second`` in milliseconds, rounded up; None for a rate of zero."""
    if per_second <= 0 or units < 0:
        return None
    return -(-units * 1000 // per_second)


# ---------------------------------------------------------------- ISO BMFF (MP4, MOV, 3GP, M4A)


def _boxes(data: bytes, start: int, end: int) -> list[tuple[bytes, int, int]]:
    """``(type, payload start, box end)`` of the boxes between ``start`` and ``end``; stops at
    the first box whose size does not fit (a truncated file's last box)."""
    out: list[tuple[bytes, int, int]] = []
    pos = start
    while pos + 8 <= end and len(out) < _MAX_BOXES:
        size, kind = struct.unpack_from(">I4s", data, pos)
        header = 8
        if size == 1:  # a 64-bit size follows the type
            (size,) = struct.unpack_from(">Q", data, pos + 8)
            header = 16
        elif size == 0:  # the box runs to the end of its parent
            size = end - pos
        if size < header or pos + size > end:
            break
        out.append((kind, pos + header, pos + size))
        pos += size
    return out


def _child(data: bytes, start: int, end: int, kind: bytes) -> tuple[int, int] | None:
    return next(((s, e) for k, s, e in _boxes(data, start, end) if k == kind), None)


def _mp4(data: bytes) -> int | None:
    moov = _child(data, 0, len(data), b"moov")
    if moov is None:
        return None
    mvhd = _child(data, *moov, b"mvhd")
    if mvhd is None:
        return None
    start = mvhd[0]
    if data[start] == 1:  # version 1: 64-bit times and duration
        timescale, duration = struct.unpack_from(">IQ", data, start + 20)
        unknown = 0xFFFF_FFFF_FFFF_FFFF
    else:
        timescale, duration = struct.unpack_from(">II", data, start + 12)
        unknown = 0xFFFF_FFFF
    if duration in (0, unknown):  # a fragmented file's movie header says nothing: its mehd may
        duration = _fragmented_duration(data, moov) or 0
    return _ceil_ms(duration, timescale) if duration else None


def _fragmented_duration(data: bytes, moov: tuple[int, int]) -> int | None:
    """A fragmented MP4's ``moov/mvex/mehd`` fragment duration (in the movie's timescale)."""
    mvex = _child(data, *moov, b"mvex")
    mehd = None if mvex is None else _child(data, *mvex, b"mehd")
    if mehd is None:
        return None
    start = mehd[0]
    fmt = ">Q" if data[start] == 1 else ">I"
    (duration,) = struct.unpack_from(fmt, data, start + 4)
    return int(duration) or None


# ---------------------------------------------------------------- WAV


def _wav(data: bytes) -> int | None:
    pos, byte_rate, chunks = 12, 0, 0
    while pos + 8 <= len(data) and chunks < _MAX_BOXES:
        kind, size = struct.unpack_from("<4sI", data, pos)
        chunks += 1
        if kind == b"fmt ":
            (byte_rate,) = struct.unpack_from("<I", data, pos + 16)
        elif kind == b"data":
            held = len(data) - pos - 8  # a streamed WAV may say 0 or 0xFFFFFFFF: its bytes say more
            size = held if size in (0, 0xFFFF_FFFF) or size > held else size
            return _ceil_ms(size, byte_rate) if byte_rate else None
        pos += 8 + size + (size & 1)
    return None


# ---------------------------------------------------------------- MP3 (MPEG audio layers I-III)

_BITRATES = {  # kbit/s by (MPEG-1?, layer) and index 1-14
    (True, 1): (32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448),
    (True, 2): (32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384),
    (True, 3): (32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    (False, 1): (32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256),
    (False, 2): (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_BITRATES[(False, 3)] = _BITRATES[(False, 2)]
_SAMPLE_RATES = {3: (44_100, 48_000, 32_000), 2: (22_050, 24_000, 16_000), 0: (11_025, 12_000, 8_000)}
"""Hz by the header's version bits (3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5) and index 0-2."""


@functools.lru_cache(maxsize=512)  # a file repeats a few headers over its thousands of frames
def _mp3_frame(header: int) -> tuple[int, int, int] | None:
    """``(frame bytes, samples, sample rate)`` of an MPEG audio frame header, or None."""
    version, layer_bits = (header >> 19) & 3, (header >> 17) & 3
    rate_index, sr_index, padding = (header >> 12) & 15, (header >> 10) & 3, (header >> 9) & 1
    if header >> 21 != 0x7FF or version == 1 or layer_bits == 0 or rate_index in (0, 15) or sr_index == 3:
        return None  # (bitrate index 0 is "free format": no frame size to walk by)
    layer, mpeg1 = 4 - layer_bits, version == 3
    bitrate, rate = _BITRATES[(mpeg1, layer)][rate_index - 1] * 1000, _SAMPLE_RATES[version][sr_index]
    if layer == 1:
        return (12 * bitrate // rate + padding) * 4, 384, rate
    samples = 1152 if layer == 2 or mpeg1 else 576
    return samples // 8 * bitrate // rate + padding, samples, rate


def _mp3(data: bytes) -> int | None:
    pos = 0
    if data[:3] == b"ID3":  # an ID3v2 tag: a synchsafe size, plus a footer when flagged
        size = (data[6] << 21) | (data[7] << 14) | (data[8] << 7) | data[9]
        pos = 10 + size + (10 if data[5] & 0x10 else 0)
    end, unpack = len(data), struct.Struct(">I").unpack_from
    samples_at: dict[tuple[int, int], int] = {}  # (samples a frame, rate) -> frames
    while pos + 4 <= end:
        frame = _mp3_frame(unpack(data, pos)[0])
        if frame is None:
            if data.startswith(_MP3_TRAILERS, pos):
                break
            return None  # bytes that are no frame before the end: a count from here would be short
        length, samples, rate = frame
        samples_at[samples, rate] = samples_at.get((samples, rate), 0) + 1
        pos += length
    return sum(-(-frames * samples * 1000 // rate) for (samples, rate), frames in samples_at.items()) or None


# ---------------------------------------------------------------- Ogg (Vorbis, Opus), FLAC


def _ogg(data: bytes) -> int | None:
    serial = data[14:18]
    segments = data[26]
    packet = data[27 + segments:27 + segments + 32]
    if packet.startswith(b"\x01vorbis"):
        (rate,) = struct.unpack_from("<I", packet, 12)
        skip = 0
    elif packet.startswith(b"OpusHead"):
        (skip,) = struct.unpack_from("<H", packet, 10)
        rate = 48_000  # an Opus stream's granule positions always count 48 kHz samples
    else:
        return None
    pos = len(data)
    for _ in range(_MAX_OGG_PAGES_BACK):
        pos = data.rfind(b"OggS", 0, pos)
        if pos < 0:
            return None
        if len(data) >= pos + 27 and data[pos + 14:pos + 18] == serial:
            (granule,) = struct.unpack_from("<q", data, pos + 6)
            if granule >= 0:  # -1: no packet ends on this page
                return _ceil_ms(max(0, granule - skip), rate)
    return None


def _flac(data: bytes) -> int | None:
    if data[4] & 0x7F != 0:  # the first metadata block must be STREAMINFO
        return None
    info = data[8:8 + 34]
    bits = int.from_bytes(info[10:18], "big")  # 20 bits rate, 3 channels, 5 depth, 36 samples
    rate, samples = bits >> 44, bits & 0xF_FFFF_FFFF
    return _ceil_ms(samples, rate) if samples else None

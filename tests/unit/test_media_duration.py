"""The playing time of audio and video is read from the container's own header bytes.

Why: Gemini counts audio and video by their length, and the build never reads a medium's bytes;
the length is read once, when the medium enters the log (``store.media_duration``). The bytes
below are made here as each format's specification lays them out: WAV by the standard
library's ``wave``, MP4/MOV boxes (ISO/IEC 14496-12 ``ftyp``/``mdat``/``moov``/``mvhd``), MPEG
audio frames (ISO/IEC 11172-3 headers), Ogg pages (RFC 3533, Vorbis and Opus identification
headers, with the page CRC) and a FLAC STREAMINFO block.
"""

from __future__ import annotations

import io
import struct
import wave

import pytest

from contextfold.store.media_duration import media_duration_ms


def wav(seconds: float, rate: int = 16_000, width: int = 2, channels: int = 1) -> bytes:
    """``seconds`` of silence as a real WAV file."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(bytes(int(seconds * rate) * width * channels))
    return out.getvalue()


def box(kind: bytes, payload: bytes, *, large: bool = False) -> bytes:
    if large:  # size 1: a 64-bit size follows the type
        return struct.pack(">I4sQ", 1, kind, 16 + len(payload)) + payload
    return struct.pack(">I4s", 8 + len(payload), kind) + payload


def mvhd(duration: int, timescale: int, version: int = 0) -> bytes:
    tail = struct.pack(">IH10x36x24xI", 0x0001_0000, 0x0100, 2)  # rate, volume, matrix, next track
    if version == 1:
        head = struct.pack(">B3xQQIQ", 1, 0, 0, timescale, duration)
    else:
        head = struct.pack(">B3xIIII", 0, 0, 0, timescale, duration)
    return box(b"mvhd", head + tail)


def mp4(seconds: float, timescale: int = 90_000, *, version: int = 0, brand: bytes = b"isom",
        moov_first: bool = False, large_mdat: bool = False) -> bytes:
    """An MP4 (``brand`` ``qt  ``: a QuickTime MOV) of ``seconds``: ``ftyp``, ``mdat``, ``moov``."""
    ftyp = box(b"ftyp", brand + struct.pack(">I", 0x200) + brand + b"mp41")
    moov = box(b"moov", mvhd(round(seconds * timescale), timescale, version)
               + box(b"trak", box(b"tkhd", bytes(84))))
    mdat = box(b"mdat", bytes(4096), large=large_mdat)
    return ftyp + (moov + mdat if moov_first else mdat + moov)


def mp3_frames(seconds: float, *, kbps: int = 128, id3: bool = True, vbr: bool = False) -> bytes:
    """MPEG-1 Layer III frames at 44.1 kHz (1152 samples each) for about ``seconds``; ``vbr``
    alternates 32 and 320 kbit/s frames; an ID3v2 tag before, an ID3v1 tag after."""
    index = {32: 1, 128: 9, 320: 14}
    frames = round(seconds * 44_100 / 1152)
    out = bytearray()
    if id3:
        out += b"ID3\x04\x00\x00" + bytes([0, 0, 0, 20]) + bytes(20)
    for i in range(frames):
        rate = (32 if i % 2 else 320) if vbr else kbps
        padding = 0
        header = 0xFFFB_0000 | (index[rate] << 12) | (0 << 10) | (padding << 9) | 0x44
        length = 144 * rate * 1000 // 44_100 + padding
        out += struct.pack(">I", header) + bytes(length - 4)
    return bytes(out + b"TAG" + bytes(125))


def _ogg_crc(page: bytes) -> int:
    crc = 0
    for byte in page:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C1_1DB7) if crc & 0x8000_0000 else crc << 1
            crc &= 0xFFFF_FFFF
    return crc


def ogg_page(packet: bytes, granule: int, sequence: int, serial: int = 7, flags: int = 0) -> bytes:
    lacing = [255] * (len(packet) // 255) + [len(packet) % 255]
    head = struct.pack("<4sBBqIIIB", b"OggS", 0, flags, granule, serial, sequence, 0, len(lacing))
    page = head + bytes(lacing) + packet
    return page[:22] + struct.pack("<I", _ogg_crc(page)) + page[26:]


def ogg(seconds: float, codec: str = "opus") -> bytes:
    if codec == "opus":
        ident, rate, skip = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, 312, 48_000, 0, 0), 48_000, 312
    else:
        ident = b"\x01vorbis" + struct.pack("<IBIiiiBB", 0, 1, 22_050, 0, 64_000, 0, 0xB8, 1)
        rate, skip = 22_050, 0
    pages = [ogg_page(ident, 0, 0, flags=2)]
    total = round(seconds * rate) + skip
    for seq in range(1, 5):
        pages.append(ogg_page(bytes(300), total * seq // 4, seq, flags=4 if seq == 4 else 0))
    pages.insert(3, ogg_page(bytes(50), -1, 9, serial=99))  # another stream's page in between
    return b"".join(pages)


def flac(seconds: float, rate: int = 44_100) -> bytes:
    samples = round(seconds * rate)
    bits = (rate << 44) | (1 << 41) | (15 << 36) | samples  # 2 channels, 16 bits
    info = struct.pack(">HH", 4096, 4096) + bytes(6) + bits.to_bytes(8, "big") + bytes(16)
    return b"fLaC" + bytes([0x80]) + len(info).to_bytes(3, "big") + info + bytes(1000)


@pytest.mark.parametrize(("seconds", "rate", "width", "channels"),
                         [(30, 16_000, 2, 1), (2.5, 44_100, 2, 2), (0.3, 8_000, 1, 1)])
def test_a_wav_lasts_its_data_over_its_byte_rate(seconds: float, rate: int, width: int,
                                                 channels: int) -> None:
    assert media_duration_ms(wav(seconds, rate, width, channels)) == round(seconds * 1000)


@pytest.mark.parametrize("options", [{}, {"version": 1}, {"brand": b"qt  "}, {"moov_first": True},
                                     {"large_mdat": True}, {"timescale": 600}])
def test_an_mp4_or_mov_lasts_its_movie_headers_duration_over_its_timescale(
        options: dict[str, object]) -> None:
    assert media_duration_ms(mp4(63.25, **options)) == 63_250  # type: ignore[arg-type]


def test_a_duration_that_is_not_a_whole_millisecond_is_rounded_up() -> None:
    assert media_duration_ms(mp4(1 / 3, timescale=3)) == 334


def test_every_mp3_frame_is_counted_so_a_vbr_file_is_not_measured_by_its_first_frame() -> None:
    frames = round(90 * 44_100 / 1152)
    exact = -(-frames * 1152 * 1000 // 44_100)
    assert media_duration_ms(mp3_frames(90)) == exact
    assert media_duration_ms(mp3_frames(90, vbr=True)) == exact  # the first frame's 320 kbit/s said ~1/5
    assert media_duration_ms(mp3_frames(90, id3=False)) == exact


@pytest.mark.parametrize("codec", ["opus", "vorbis"])
def test_an_ogg_stream_lasts_its_last_granule_position(codec: str) -> None:
    assert media_duration_ms(ogg(42.5, codec)) == 42_500


def test_a_flac_file_lasts_its_streaminfo_sample_count() -> None:
    assert media_duration_ms(flac(12.5)) == 12_500


@pytest.mark.parametrize("data", [
    b"", b"ID3" + bytes(99_997), b"RIFF\x00\x00\x00\x00WAVE", b"\x00\x00\x00\x18ftypisom" + bytes(16),
    mp4(10)[:-60],  # a truncated movie header
    mp3_frames(5)[:2000] + b"garbage that is no frame" + mp3_frames(5)[2000:],
    b"OggS" + bytes(60), flac(3)[:20], b"%PDF-1.7\n",
    box(b"ftyp", b"isom") + box(b"moov", mvhd(0, 1000)),  # a fragmented file's unknown length
])
def test_bytes_that_do_not_hold_together_give_no_length(data: bytes) -> None:
    assert media_duration_ms(data) is None


def test_a_fragmented_mp4_lasts_its_fragment_duration() -> None:
    mehd = box(b"mehd", struct.pack(">B3xI", 0, 12_000))
    data = box(b"ftyp", b"iso6") + box(b"moov", mvhd(0, 1000) + box(b"mvex", mehd))
    assert media_duration_ms(data) == 12_000

"""Issue 19 points 2 and 12: `train-step --weights FILE` reads tensors saved by torch.save and nothing else.

No code from the file runs (a TorchScript archive whose ``__setstate__`` would run is refused), the zip
directory is looked at before anything expands (a small deflated record that would become a GiB is refused
unexpanded), and the whole archive may hold no more than the largest CLIP's parameters need. Hostile files
are built here; each run is measured in a child (tests/bounded.py)."""

from __future__ import annotations

import struct
import warnings
import zlib
from pathlib import Path
from typing import List, Tuple

import pytest

from tests.bounded import run_npudoctor

MARKER = "CODE-FROM-THE-FILE-RAN"


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def train_step(weights: Path):
    return run_npudoctor(["train-step", "--device", "cpu", "--steps", "3", "--batch", "4", "--weights",
                          str(weights)], kill_after_s=120)


def test_a_torchscript_archive_is_refused_and_its_setstate_never_runs(tmp_path, torch, capsys):
    class Hostile(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("weight", torch.zeros(2))

        @torch.jit.export
        def __getstate__(self) -> Tuple[torch.Tensor, bool]:
            return (self.weight, self.training)

        @torch.jit.export
        def __setstate__(self, state: Tuple[torch.Tensor, bool]) -> None:
            print("CODE-FROM-THE-FILE-RAN")
            self.weight = state[0]
            self.training = state[1]

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.weight

    path = tmp_path / "scripted.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch >= 2.9 deprecates TorchScript
        torch.jit.save(torch.jit.script(Hostile()), str(path))
        capsys.readouterr()
        torch.jit.load(str(path))  # the file is what it says: loading it the old way runs its code (here)
        assert MARKER in capsys.readouterr().out  # (torch routes TorchScript's print to sys.stdout)
    result = train_step(path)
    assert MARKER not in result.stdout + result.stderr
    result.assert_one_line_error("TorchScript", "never runs")
    result.assert_cheap()  # refused from the zip directory, before torch is imported


def zip_bytes(members: List[Tuple[str, int, bytes, int, int]]) -> bytes:
    """A zip file from (name, method, data as stored, crc32, uncompressed size), written field by field."""
    out, directory = bytearray(), bytearray()
    for name, method, data, crc, size in members:
        encoded = name.encode()
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, crc, len(data), size,
                           len(encoded), 0) + encoded + data
        directory += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0, crc, len(data),
                                 size, len(encoded), 0, 0, 0, 0, 0, offset) + encoded
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(directory), len(out), 0)
    return bytes(out + directory + end)


def test_a_deflated_record_that_would_expand_to_a_gib_is_refused_unexpanded(tmp_path, torch):
    """A real torch.save archive whose tensor record is swapped for 1 GiB of zeros deflated to ~1 MiB."""
    import zipfile

    saved = tmp_path / "small.pt"
    torch.save({"weight": torch.zeros(4)}, saved)
    with zipfile.ZipFile(saved) as archive:
        records = [(info.filename, archive.read(info)) for info in archive.infolist()]
    chunk = bytes(16 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)  # the same bytes for each chunk
    count = 64
    crc = 0
    for _ in range(count):
        crc = zlib.crc32(chunk, crc)
    members = []
    for name, data in records:
        if name.endswith("/data/0"):
            members.append((name, zipfile.ZIP_DEFLATED, block * count + compressor.flush(), crc, count * len(chunk)))
        else:
            members.append((name, zipfile.ZIP_STORED, data, zlib.crc32(data), len(data)))
    bomb = tmp_path / "bomb.pt"
    bomb.write_bytes(zip_bytes(members))
    assert bomb.stat().st_size < 2 << 20
    result = train_step(bomb)
    result.assert_one_line_error("decompression bomb", "data/0")
    result.assert_cheap()


def test_an_archive_holding_more_than_the_largest_clip_needs_is_refused(tmp_path):
    """A stored record declared (and sparsely written) at 2 GiB: more bytes than ViT-L/14@336 in fp32."""
    from npudoctor.workload import clip

    size = 2 << 30
    assert size > clip.max_weights_bytes()
    path = tmp_path / "huge.pt"
    name = b"archive/data/0"
    with path.open("wb") as handle:
        header = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, 0, size, size, len(name), 0) + name
        handle.write(header)
        handle.seek(size, 1)  # a hole: nothing is written
        directory = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, 0, size, size, len(name),
                                0, 0, 0, 0, 0, 0) + name
        pickle_name = b"archive/data.pkl"
        start = handle.tell()
        handle.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, 0, 0, 0, len(pickle_name), 0)
                     + pickle_name)
        directory += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, 0, 0, 0, len(pickle_name),
                                 0, 0, 0, 0, 0, start) + pickle_name
        where = handle.tell()
        handle.write(directory + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 2, 2, len(directory), where, 0))
    result = train_step(path)
    result.assert_one_line_error("largest CLIP")
    result.assert_cheap()


def test_the_size_cap_is_the_largest_clips_parameters():
    from npudoctor.workload import clip

    torch = pytest.importorskip("torch")
    for config in clip.CONFIGS.values():
        model = clip.build_model(config)
        assert clip.parameter_count(config) == sum(p.numel() for p in model.parameters())
    assert clip.parameter_count(clip.CONFIGS["vit-b-32"]) == 151_277_313  # openai/CLIP ViT-B/32
    assert clip.parameter_count(clip.LARGEST_CONFIG) == 427_944_193  # ViT-L/14@336px
    assert torch is not None


@pytest.mark.parametrize("content", [b"", b"\x00garbage", b"PK\x05\x06" + bytes(18)])
def test_files_that_are_no_torch_save_archive_are_one_line(tmp_path, content):
    path = tmp_path / "odd.pt"
    path.write_bytes(content)
    result = train_step(path)
    result.assert_one_line_error(str(path))
    result.assert_cheap()


def test_a_fifo_is_refused_without_blocking(tmp_path):
    import os

    fifo = tmp_path / "fifo.pt"
    os.mkfifo(fifo)
    result = train_step(fifo)
    result.assert_one_line_error("not a regular file")
    result.assert_cheap()


def test_a_link_to_pagemap_and_pagemap_itself_are_one_line(tmp_path):
    """Issue 33 (a regression): /proc/self/pagemap is "regular" to stat but not readable like a file."""
    import os

    if not os.path.exists("/proc/self/pagemap"):
        pytest.skip("no /proc/self/pagemap here")
    link = tmp_path / "weights.pt"
    link.symlink_to("/proc/self/pagemap")
    train_step(link).assert_one_line_error("a symbolic link (not followed")
    direct = train_step(Path("/proc/self/pagemap"))
    direct.assert_one_line_error("/proc/self/pagemap")
    direct.assert_cheap()


class _RunsCode:
    """Pickled by torch.save as a call of print: what a hostile checkpoint's data.pkl carries."""

    def __reduce__(self):
        return (print, (MARKER,))


def test_a_pickle_that_would_call_code_is_refused_without_calling_it(tmp_path, torch, capsys):
    path = tmp_path / "pickled.pt"
    torch.save({"state_dict": {"weight": torch.zeros(2)}, "hook": _RunsCode()}, path)
    capsys.readouterr()
    torch.load(path, weights_only=False)  # the file is what it says: an unrestricted load runs the call (here)
    assert MARKER in capsys.readouterr().out
    result = train_step(path)
    assert MARKER not in result.stdout + result.stderr
    result.assert_one_line_error("cannot load weights")


def test_a_directory_of_a_million_members_is_refused_before_it_is_parsed(tmp_path):
    """The end record announces 1,000,000 members (zip64): refused from those 98 bytes, no directory parsed."""
    zip64_end = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, 1_000_000, 1_000_000, 46_000_000, 0)
    locator = struct.pack("<IIQI", 0x07064B50, 0, 0, 1)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    path = tmp_path / "members.pt"
    path.write_bytes(zip64_end + locator + end)
    result = train_step(path)
    result.assert_one_line_error("1000000 archive members")
    result.assert_cheap()

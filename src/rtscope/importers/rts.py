"""Importer `rts`: rtscope sample files written elsewhere (a board, the Elixir API)."""

from __future__ import annotations

from pathlib import Path

from .. import samplefile
from .base import Importer


def convert(path: Path, variant: str | None, settings: dict) -> list[samplefile.SampleFile]:
    sf = samplefile.read(path)
    sf.header["settings"].update(settings)
    return [sf]


IMPORTERS = (
    Importer("rts", "rtscope sample files (.rts)", convert),
)

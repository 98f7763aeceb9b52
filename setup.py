"""rtscope's build hooks (the project itself is described in pyproject.toml).

A wheel carries, besides the Python package, the pieces src/rtscope/layout.py names: the static rtprobe and
taskmem for x86_64, aarch64 and armhf (`make cross`), the compiled BEAM harness (`make beam`), the specs, and
build.json (version and commit). `build_py` copies them from the checkout's build output into
rtscope/data/ and refuses to build when one is missing or a probe is not a static executable of its
architecture. An sdist carries the same pieces at their checkout paths, so a wheel builds from it without
compilers. `make dist` builds both (docs/install.md).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import struct
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.errors import SetupError

HERE = Path(__file__).resolve().parent


def load_layout():
    """src/rtscope/layout.py, loaded on its own (the package's dependencies are not installed while building)."""
    spec = importlib.util.spec_from_file_location("rtscope_layout", HERE / "src" / "rtscope" / "layout.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PT_DYNAMIC, PT_INTERP, DT_NULL, DT_NEEDED = 2, 3, 0, 1


def elf_problem(path: Path, machine: int) -> str | None:
    """Why `path` is not a static ELF executable for ELF machine number `machine`; None when it is one.
    Static means no program interpreter and no shared library needed (a static PIE has a dynamic section
    without DT_NEEDED entries)."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        return "not an ELF file"
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    if struct.unpack_from(order + "H", data, 18)[0] != machine:
        return f"built for ELF machine {struct.unpack_from(order + 'H', data, 18)[0]}, not {machine}"
    if wide:
        phoff, = struct.unpack_from(order + "Q", data, 32)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 54)
        header, entry = order + "II QQQQ", order + "qQ"  # p_type p_flags p_offset p_vaddr p_paddr p_filesz
    else:
        phoff, = struct.unpack_from(order + "I", data, 28)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 42)
        header, entry = order + "IIIII", order + "iI"    # p_type p_offset p_vaddr p_paddr p_filesz
    for i in range(phnum):
        fields = struct.unpack_from(header, data, phoff + i * phentsize)
        p_type = fields[0]
        offset, size = (fields[2], fields[5]) if wide else (fields[1], fields[4])
        if p_type == PT_INTERP:
            return "dynamically linked (it names an ELF interpreter)"
        if p_type == PT_DYNAMIC:
            for at in range(offset, offset + size, struct.calcsize(entry)):
                tag, _ = struct.unpack_from(entry, data, at)
                if tag == DT_NULL:
                    break
                if tag == DT_NEEDED:
                    return "dynamically linked (it needs shared libraries)"
    return None


def build_info(root: Path, version: str) -> dict:
    """Version and commit: git's answer in a checkout, else the build.json an sdist carries."""
    layout = load_layout()
    commit = layout.git_commit(root)
    recorded = root / layout.BUILD_INFO
    if commit is None and recorded.is_file():
        commit = json.loads(recorded.read_text()).get("commit")
    return {"version": version, "commit": commit}


def copy_pieces(root: Path, dest: Path, to_checkout_paths: bool) -> None:
    """Every piece of layout.PIECES from the checkout (or unpacked sdist) at `root` into `dest`: at its wheel
    path (rtscope/data/...) or, for an sdist, at its checkout path. Fails the build on a missing piece or a
    probe that is not a static executable of its architecture."""
    layout = load_layout()
    problems = []
    for piece, rel in layout.PIECES.items():
        src = root / rel
        if not src.exists():
            problems.append(f"{piece}: {rel} is missing")
            continue
        arch = next((a for a in layout.PROBE_ARCHES
                     if piece in {layout.probe(t, a) for t in layout.PROBE_TOOLS}), None)
        if arch is not None:
            why = elf_problem(src, layout.PROBE_ELF_MACHINE[arch])
            if why:
                problems.append(f"{piece}: {rel} is not a static {arch} executable: {why}")
                continue
        target = dest / (rel if to_checkout_paths else piece)
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("*.swp", "*~", ".*"))
        else:
            shutil.copy2(src, target)  # keeps the probes executable
    if problems:
        raise SetupError("rtscope's wheel cannot be built: run `make cross beam` (or `make dist`) first:\n  "
                         + "\n  ".join(problems))


class BuildPyWithPieces(build_py):
    """build_py, then the pieces into rtscope/data/ (not for an editable install: that uses the checkout)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        layout = load_layout()
        dest = Path(self.build_lib) / "rtscope" / layout.DATA_DIR
        shutil.rmtree(dest, ignore_errors=True)
        copy_pieces(HERE, dest, to_checkout_paths=False)
        (dest / layout.BUILD_INFO).write_text(json.dumps(build_info(HERE, self.distribution.get_version())) + "\n")


class SdistWithPieces(sdist):
    """The source distribution, plus the built pieces and build.json: a wheel builds from it without compilers."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        copy_pieces(HERE, Path(base_dir), to_checkout_paths=True)
        info = build_info(HERE, self.distribution.get_version())
        (Path(base_dir) / load_layout().BUILD_INFO).write_text(json.dumps(info) + "\n")


if __name__ == "__main__":
    setup(cmdclass={"build_py": BuildPyWithPieces, "sdist": SdistWithPieces})

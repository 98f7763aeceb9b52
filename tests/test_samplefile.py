import struct
import zlib

import numpy as np
import pytest

from rtscope import samplefile
from rtscope.errors import SampleFileError

pytestmark = pytest.mark.fast


def test_roundtrip_keeps_every_value_and_metadata(make_samplefile):
    values = [5, 1, 2**40, -3]
    sf = samplefile.read(make_samplefile(values, settings={"cpu": 1}))
    assert sf.n == 4
    assert sf.data["duration"].tolist() == values
    assert sf.header["settings"] == {"cpu": 1}
    assert sf.primary.name == "duration" and sf.primary.unit == "ns"
    assert sf.trailer == {"finished_at": "2026-01-01T00:00:01Z"}


def test_empty_run_is_valid(make_samplefile):
    assert samplefile.read(make_samplefile([])).n == 0


def blob_of(make_samplefile, values=(1, 2, 3)) -> bytes:
    return make_samplefile(list(values)).read_bytes()


@pytest.mark.parametrize("cut", [1, 8, 24, 40])
def test_truncated_file_is_rejected(make_samplefile, tmp_path, cut):
    blob = blob_of(make_samplefile)
    bad = tmp_path / "cut.rts"
    bad.write_bytes(blob[:-cut])
    with pytest.raises(SampleFileError, match="truncated|corrupt"):
        samplefile.read(bad)


def test_flipped_record_byte_fails_checksum(make_samplefile):
    blob = bytearray(blob_of(make_samplefile))
    (hlen,) = struct.unpack_from("<I", blob, 8)
    blob[12 + hlen + 3] ^= 0xFF
    with pytest.raises(SampleFileError, match="checksum"):
        samplefile.parse(bytes(blob))


def test_wrong_magic_and_bad_header(make_samplefile):
    blob = blob_of(make_samplefile)
    with pytest.raises(SampleFileError, match="magic"):
        samplefile.parse(b"XXXXXXXX" + blob[8:])
    (hlen,) = struct.unpack_from("<I", blob, 8)
    garbage = blob[:12] + b"{" * hlen + blob[12 + hlen:]
    with pytest.raises(SampleFileError, match="header is not valid JSON"):
        samplefile.parse(garbage)


def test_count_that_does_not_match_size_is_rejected(make_samplefile):
    blob = blob_of(make_samplefile)
    tlen, count, crc, end = samplefile.TAIL.unpack_from(blob, len(blob) - samplefile.TAIL.size)
    forged = blob[:-samplefile.TAIL.size] + samplefile.TAIL.pack(tlen, count + 1, crc, end)
    with pytest.raises(SampleFileError, match="sizes do not add up"):
        samplefile.parse(forged)


def test_header_missing_keys_and_unknown_type():
    def file_with(header: dict) -> bytes:
        head = __import__("json").dumps(header).encode()
        return (samplefile.MAGIC + struct.pack("<I", len(head)) + head + b"{}"
                + samplefile.TAIL.pack(2, 0, zlib.crc32(b""), samplefile.END_MAGIC))
    good = samplefile.make_header("exec", "sum", "native", "t", "0", "now", [samplefile.Column("d", "ns", "i64")])
    assert samplefile.parse(file_with(good)).n == 0
    with pytest.raises(SampleFileError, match="lacks 'workload'"):
        samplefile.parse(file_with({k: v for k, v in good.items() if k != "workload"}))
    with pytest.raises(SampleFileError, match="valid types: i64, u64, f64"):
        samplefile.parse(file_with({**good, "columns": [{"name": "d", "unit": "ns", "type": "i32"}]}))
    with pytest.raises(SampleFileError, match="version 2 is not supported"):
        samplefile.parse(file_with({**good, "version": 2}))


def test_failed_write_leaves_nothing(tmp_path):
    target = tmp_path / "x.rts"
    cols = [samplefile.Column("d", "ns", "i64"), samplefile.Column("e", "", "i64")]
    header = samplefile.make_header("exec", "sum", "native", "t", "0", "now", cols)
    with pytest.raises(ValueError, match="different lengths"):
        samplefile.write(target, header, {"d": np.array([1, 2]), "e": np.array([1])})
    assert list(tmp_path.iterdir()) == []


def test_c_probe_file_is_read(rtprobe, tmp_path):
    import subprocess
    out = tmp_path / "p.rts"
    subprocess.run([str(rtprobe), "exec", "sum", "--iterations", "20", "--pause-ms", "0", "--output", str(out)],
                   check=True)
    sf = samplefile.read(out)
    assert sf.header["workload"] == "exec" and sf.header["variant"] == "sum" and sf.header["runtime"] == "native"
    assert sf.n == 20 and (sf.data["duration"] > 0).all()
    assert [c.name for c in sf.columns][0] == "duration"

defmodule RtScope.SampleFileTest do
  use ExUnit.Case, async: true

  alias RtScope.SampleFile
  alias RtScope.Test.SampleReader

  doctest RtScope.SampleFile

  @moduletag :tmp_dir

  @header [
    workload: "exec",
    variant: "sum",
    runtime: "beam",
    tool: "rtscope-beam",
    tool_version: "0.1.0",
    started_at: "2026-01-01T00:00:00.000Z",
    settings: %{priority: "high"},
    params: %{n: 4000},
    columns: [
      %{name: "duration", unit: "ns", type: "i64"},
      %{name: "heap_size", unit: "words", type: "i64"}
    ]
  ]

  defp records(pairs),
    do: for({a, b} <- pairs, into: <<>>, do: <<a::little-signed-64, b::little-signed-64>>)

  test "written file reads back whole: header, records, trailer, CRC", %{tmp_dir: dir} do
    path = Path.join(dir, "run.rts")
    trailer = [finished_at: "2026-01-01T00:00:01.000Z", counters: %{missed: 0}, notes: ["n"]]
    assert :ok = SampleFile.write(path, @header, records([{100, 233}, {-5, 376}]), trailer)

    assert {:ok, file} = SampleReader.read(path)
    assert file.count == 2
    assert file.rows == [[100, 233], [-5, 376]]
    assert file.header["format"] == "rtscope-samples"
    assert file.header["version"] == 1
    assert file.header["settings"] == %{"priority" => "high"}

    assert file.trailer == %{
             "finished_at" => "2026-01-01T00:00:01.000Z",
             "counters" => %{"missed" => 0},
             "notes" => ["n"]
           }

    # format and version lead the header
    bin = File.read!(path)
    assert binary_part(bin, 12, 40) =~ ~s({"format":"rtscope-samples","version":1,)
    assert Path.wildcard(Path.join(dir, ".*")) == []
  end

  test "the reader rejects a truncated or corrupted file", %{tmp_dir: dir} do
    path = Path.join(dir, "run.rts")
    :ok = SampleFile.write(path, @header, records([{1, 2}, {3, 4}]), %{})
    bin = File.read!(path)

    assert {:error, "bad end magic" <> _} =
             SampleReader.parse(binary_part(bin, 0, byte_size(bin) - 1))

    # flip one bit inside the first record
    hlen = :binary.decode_unsigned(binary_part(bin, 8, 4), :little)
    pos = 12 + hlen
    <<pre::binary-size(pos), b, post::binary>> = bin

    assert {:error, "CRC mismatch"} =
             SampleReader.parse(<<pre::binary, Bitwise.bxor(b, 1), post::binary>>)
  end

  test "bad headers and partial records are refused, nothing is written", %{tmp_dir: dir} do
    path = Path.join(dir, "bad.rts")

    assert {:error, "record bytes (12) are not a multiple of 16"} =
             SampleFile.write(path, @header, <<0::96>>, %{})

    assert {:error, "sample header lacks tool"} =
             SampleFile.write(path, Keyword.delete(@header, :tool), <<>>, %{})

    bad_col = Keyword.put(@header, :columns, [%{name: "d", unit: "parsecs", type: "i64"}])
    assert {:error, "bad column" <> _} = SampleFile.write(path, bad_col, <<>>, %{})

    assert {:error, "sample header needs at least one column"} =
             SampleFile.write(path, Keyword.put(@header, :columns, []), <<>>, %{})

    refute File.exists?(path)
    assert Path.wildcard(Path.join(dir, ".*")) == []
  end

  test "an unwritable target leaves no file and says why", %{tmp_dir: dir} do
    path = Path.join([dir, "missing", "x.rts"])
    assert {:error, "cannot write " <> _} = SampleFile.write(path, @header, <<>>, %{})
    refute File.exists?(path)
  end

  test "a path that is a FIFO (or a device, or a directory) is refused, not replaced", %{
    tmp_dir: dir
  } do
    fifo = Path.join(dir, "fifo")
    {_, 0} = System.cmd("mkfifo", [fifo])
    assert {:error, msg} = SampleFile.write(fifo, @header, <<>>, %{})
    assert msg =~ "exists and is not a regular file"
    assert {:ok, %File.Stat{type: :other}} = File.lstat(fifo)
    assert {:error, _} = SampleFile.write(dir, @header, <<>>, %{})
  end

  test "write/5 packs rows of i64, u64 and f64 and fills the BEAM defaults", %{tmp_dir: dir} do
    path = Path.join(dir, "rows.rts")

    header = %{
      "workload" => "tasks",
      "variant" => "switch",
      "started_at" => SampleFile.now(),
      "settings" => %{},
      "params" => %{}
    }

    columns = [{"ns_per_switch", "ns", :f64}, {"switches", "count", :i64}, {"big", "", "u64"}]

    assert :ok =
             SampleFile.write(
               path,
               header,
               columns,
               [[1.5, 2000, 18_000_000_000_000_000_000], [2, 2000, 0]],
               %{}
             )

    assert {:ok, file} = SampleReader.read(path)
    assert file.rows == [[1.5, 2000, 18_000_000_000_000_000_000], [2.0, 2000, 0]]
    assert file.header["runtime"] == "beam"
    assert file.header["tool"] == "rtscope-beam"
    assert [%{"name" => "ns_per_switch", "type" => "f64"} | _] = file.header["columns"]

    assert {:error, "row [1] does not have 3 values"} =
             SampleFile.write(path <> "2", header, columns, [[1]], %{})

    assert {:error, "row [1, 2, -1] does not fit the column types" <> _} =
             SampleFile.write(path <> "2", header, columns, [[1, 2, -1]], %{})

    refute File.exists?(path <> "2")
  end

  test "now/0 is RFC 3339 UTC with milliseconds" do
    assert SampleFile.now() =~ ~r/\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\z/
  end
end

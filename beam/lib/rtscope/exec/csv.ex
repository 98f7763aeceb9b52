defmodule RtScope.Exec.CSV do
  @moduledoc """
  The study's CSV layout for `exec` runs: `count,time,heap_size,minor_gcs`,
  one line per call, `count` from 1, `time` in µs (the duration in ns
  rounded to the nearest µs), `heap_size` in words, `minor_gcs` the minor
  collection count of the measuring process after the call. `rtscope
  import` reads this layout too.
  """

  alias RtScope.SampleFile

  @doc """
  Encodes exec records (duration ns, heap_size, minor_gcs; i64 LE each).

      iex> recs = <<1499::little-signed-64, 233::little-signed-64, 0::little-signed-64,
      ...>   2500::little-signed-64, 376::little-signed-64, 1::little-signed-64>>
      iex> recs |> RtScope.Exec.CSV.encode() |> IO.iodata_to_binary()
      "count,time,heap_size,minor_gcs\\n1,1,233,0\\n2,3,376,1\\n"
  """
  @spec encode(binary()) :: iodata()
  def encode(records), do: encode(records, ["time", "heap_size", "minor_gcs"], 1)

  @doc """
  The same layout for other records: `count` then `columns` (their CSV
  names), the first `times` of them durations in ns written in µs. The
  GPIO workload's nerves_rt_perf layout is
  `count,time_for_write_1,time_for_write_0,heap_size,minor_gcs`.

      iex> recs = <<1499::little-signed-64, 700::little-signed-64, 233::little-signed-64>>
      iex> recs |> RtScope.Exec.CSV.encode(["t1", "t0", "heap_size"], 2) |> IO.iodata_to_binary()
      "count,t1,t0,heap_size\\n1,1,1,233\\n"
  """
  @spec encode(binary(), [String.t()], non_neg_integer()) :: iodata()
  def encode(records, columns, times) do
    size = 8 * length(columns)

    rows =
      for {<<row::binary-size(size)>>, i} <- Enum.with_index(chunks(records, size), 1) do
        values = for <<v::little-signed-64 <- row>>, do: v
        {durations, rest} = Enum.split(values, times)
        Enum.map_join([i | Enum.map(durations, &us/1) ++ rest], ",", &Integer.to_string/1) <> "\n"
      end

    [Enum.join(["count" | columns], ","), "\n" | rows]
  end

  defp chunks(bin, size), do: for(<<c::binary-size(size) <- bin>>, do: c)

  # Round half up on the magnitude.
  defp us(ns) when ns >= 0, do: div(ns + 500, 1000)
  defp us(ns), do: -us(-ns)

  @doc """
  Writes a run's CSV atomically (temp file, fsync, rename) when the run
  asked for one (`path` not nil), as `encode/3` lays it out; a failure is
  the run's `{:error, {:failed, message}}`.
  """
  @spec write_run(Path.t() | nil, binary(), [String.t()], non_neg_integer()) ::
          :ok | {:error, {:failed, String.t()}}
  def write_run(path, records, columns \\ ["time", "heap_size", "minor_gcs"], times \\ 1)
  def write_run(nil, _records, _columns, _times), do: :ok

  def write_run(path, records, columns, times) do
    case SampleFile.write_atomically(path, encode(records, columns, times)) do
      :ok -> :ok
      {:error, msg} -> {:error, {:failed, msg}}
    end
  end
end

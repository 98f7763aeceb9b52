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
  def encode(records), do: ["count,time,heap_size,minor_gcs\n" | lines(records, 1, [])]

  defp lines(
         <<d::little-signed-64, h::little-signed-64, g::little-signed-64, rest::binary>>,
         i,
         acc
       ) do
    line = [
      Integer.to_string(i),
      ?,,
      Integer.to_string(us(d)),
      ?,,
      Integer.to_string(h),
      ?,,
      Integer.to_string(g),
      ?\n
    ]

    lines(rest, i + 1, [acc | line])
  end

  defp lines(<<>>, _i, acc), do: acc

  # Round half up on the magnitude.
  defp us(ns) when ns >= 0, do: div(ns + 500, 1000)
  defp us(ns), do: -us(-ns)

  @doc "Writes the CSV atomically (temp file, fsync, rename)."
  @spec write(Path.t(), binary()) :: :ok | {:error, String.t()}
  def write(path, records), do: SampleFile.write_atomically(path, encode(records))
end

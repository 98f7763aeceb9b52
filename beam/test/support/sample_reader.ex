defmodule RtScope.Test.SampleReader do
  @moduledoc """
  Reads an rtscope sample file back, checking everything the format
  promises: both magics, sizes that add up exactly, the record CRC-32 and
  JSON header and trailer. Records come back as lists of integers/floats.
  """

  alias RtScope.JSON

  @spec read(Path.t()) :: {:ok, map()} | {:error, String.t()}
  def read(path) do
    with {:ok, bin} <- File.read(path), do: parse(bin)
  end

  @spec parse(binary()) :: {:ok, map()} | {:error, String.t()}
  def parse(bin) when byte_size(bin) < 36, do: {:error, "truncated: #{byte_size(bin)} bytes"}

  def parse(bin) do
    size = byte_size(bin)
    <<magic::binary-8, hlen::little-unsigned-32, _::binary>> = bin

    <<tlen::little-unsigned-32, n::little-unsigned-64, crc::little-unsigned-32,
      end_magic::binary-8>> = binary_part(bin, size - 24, 24)

    with :ok <- expect(magic == "RTSCSF01", "bad magic #{inspect(magic)}"),
         :ok <- expect(end_magic == "RTSCEND1", "bad end magic #{inspect(end_magic)}"),
         :ok <- expect(12 + hlen <= size - 24, "header length beyond the file"),
         {:ok, header} <- JSON.decode(binary_part(bin, 12, hlen)),
         ncols = length(header["columns"]),
         :ok <- expect(12 + hlen + n * 8 * ncols + tlen + 24 == size, "sizes do not add up"),
         records = binary_part(bin, 12 + hlen, n * 8 * ncols),
         :ok <- expect(:erlang.crc32(records) == crc, "CRC mismatch"),
         {:ok, trailer} <- JSON.decode(binary_part(bin, 12 + hlen + n * 8 * ncols, tlen)) do
      types = Enum.map(header["columns"], & &1["type"])
      {:ok, %{header: header, trailer: trailer, count: n, rows: rows(records, types, [])}}
    end
  end

  @doc "The values of column `name` of a read file."
  def column(%{header: h, rows: rows}, name) do
    i = Enum.find_index(h["columns"], &(&1["name"] == name)) || raise "no column #{name}"
    Enum.map(rows, &Enum.at(&1, i))
  end

  defp rows(<<>>, _types, acc), do: Enum.reverse(acc)

  defp rows(bin, types, acc) do
    {row, rest} =
      Enum.map_reduce(types, bin, fn
        "i64", <<v::little-signed-64, r::binary>> -> {v, r}
        "u64", <<v::little-unsigned-64, r::binary>> -> {v, r}
        "f64", <<v::little-float-64, r::binary>> -> {v, r}
      end)

    rows(rest, types, [row | acc])
  end

  defp expect(true, _msg), do: :ok
  defp expect(false, msg), do: {:error, msg}
end

defmodule RtScope.SampleFile do
  @moduledoc """
  Writer of the rtscope sample file, format version 1 (`docs/sample-format.md`).

      "RTSCSF01" | u32 H | header JSON (H bytes) | N records of R bytes |
      trailer JSON (T bytes) | u32 T | u64 N | u32 CRC-32 of records | "RTSCEND1"

  All integers are little-endian, R = 8 × number of columns. The BEAM harness
  buffers records in memory while measuring, so a file is written in one go
  after the run: to a temporary file in the target directory, flushed with
  `fsync`, then renamed over the target. A VM that dies part way leaves at
  most a stray temporary file without the fixed tail, never a valid file.
  """

  alias RtScope.JSON

  @magic "RTSCSF01"
  @end_magic "RTSCEND1"
  @types ["i64", "u64", "f64"]
  @units ["ns", "bytes", "count", "words", ""]

  @typedoc "A column of the records: name, unit (`ns`, `bytes`, `count`, `words`, `\"\"`) and type."
  @type column :: %{name: String.t(), unit: String.t(), type: String.t()}

  @doc "The file's leading magic."
  def magic, do: @magic

  @doc "The file's trailing magic."
  def end_magic, do: @end_magic

  @doc """
  Encodes one sample file.

  `header` is a keyword list (or map) with at least `workload`, `variant`,
  `runtime`, `tool`, `tool_version`, `started_at`, `settings`, `params` and
  `columns`; `format` and `version` are put first. `records` is iodata holding
  whole records. Returns `{:ok, iodata}` or `{:error, message}`.

      iex> header = [workload: "exec", variant: "nothing", runtime: "beam", tool: "t",
      ...>   tool_version: "0", started_at: "2026-01-01T00:00:00.000Z", settings: %{},
      ...>   params: %{}, columns: [%{name: "duration", unit: "ns", type: "i64"}]]
      iex> {:ok, io} = RtScope.SampleFile.encode(header, <<42::little-signed-64>>, %{})
      iex> bin = IO.iodata_to_binary(io)
      iex> {binary_part(bin, 0, 8), binary_part(bin, byte_size(bin) - 8, 8)}
      {"RTSCSF01", "RTSCEND1"}
  """
  @spec encode(keyword() | map(), iodata(), keyword() | map()) ::
          {:ok, iodata()} | {:error, String.t()}
  def encode(header, records, trailer) do
    header = Enum.to_list(header)
    records = IO.iodata_to_binary(records)

    with :ok <- check_header(header),
         ncols = length(fetch(header, :columns)),
         :ok <- check_records(records, ncols),
         {:ok, hjson} <- JSON.encode([format: "rtscope-samples", version: 1] ++ drop_fv(header)),
         {:ok, tjson} <- JSON.encode(trailer) do
      n = div(byte_size(records), 8 * ncols)

      {:ok,
       [
         @magic,
         <<byte_size(hjson)::little-unsigned-32>>,
         hjson,
         records,
         tjson,
         <<byte_size(tjson)::little-unsigned-32, n::little-unsigned-64,
           :erlang.crc32(records)::little-unsigned-32>>,
         @end_magic
       ]}
    end
  end

  @doc """
  Writes one sample file to `path` atomically (temp file, fsync, rename).

  Returns `:ok` or `{:error, message}`; on error no file is left at `path`
  (an existing file there is left untouched) and the temp file is removed.
  """
  @spec write(Path.t(), keyword() | map(), iodata(), keyword() | map()) ::
          :ok | {:error, String.t()}
  def write(path, header, records, trailer) do
    with {:ok, io} <- encode(header, records, trailer) do
      write_atomically(path, io)
    end
  end

  @doc """
  Writes one sample file from rows, for writers that hold their samples as
  lists rather than packed records.

  `columns` is a list of `{name, unit, type}` with type `:i64`, `:u64` or
  `:f64` (or the same as strings), `rows` a list of lists of numbers in
  column order. `header` (map or keyword, atom or string keys) gets the
  columns and, where missing, `runtime: "beam"`, `tool: "rtscope-beam"` and
  this application's `tool_version`.
  """
  @spec write(
          Path.t(),
          keyword() | map(),
          [{String.t(), String.t(), atom() | String.t()}],
          [[number()]],
          keyword() | map()
        ) ::
          :ok | {:error, String.t()}
  def write(path, header, columns, rows, trailer) do
    cols =
      Enum.map(columns, fn {name, unit, type} ->
        %{name: to_string(name), unit: unit, type: to_string(type)}
      end)

    types = Enum.map(cols, & &1.type)

    with :ok <- check_columns(cols),
         {:ok, records} <- pack_rows(rows, types, []) do
      header = Enum.to_list(header)

      defaults =
        [runtime: "beam", tool: "rtscope-beam", tool_version: RtScope.VmInfo.tool_version()]
        |> Enum.reject(fn {k, _} -> fetch(header, k) != nil end)

      header =
        Enum.reject(header, fn {k, _} -> k in [:columns, "columns"] end) ++
          defaults ++ [columns: cols]

      write(path, header, records, trailer)
    end
  end

  defp pack_rows([], _types, acc), do: {:ok, Enum.reverse(acc)}

  defp pack_rows([row | rest], types, acc) when is_list(row) and length(row) == length(types) do
    packed = Enum.zip_with(row, types, &pack/2)

    if Enum.all?(packed, &is_binary/1),
      do: pack_rows(rest, types, [packed | acc]),
      else: {:error, "row #{inspect(row)} does not fit the column types #{inspect(types)}"}
  end

  defp pack_rows([row | _], types, _acc),
    do: {:error, "row #{inspect(row)} does not have #{length(types)} values"}

  defp pack(v, "i64") when is_integer(v), do: <<v::little-signed-64>>
  defp pack(v, "u64") when is_integer(v) and v >= 0, do: <<v::little-unsigned-64>>
  defp pack(v, "f64") when is_number(v), do: <<v * 1.0::little-float-64>>
  defp pack(_v, _type), do: :error

  @doc "The current UTC time as RFC 3339 with milliseconds, for `started_at`/`finished_at`."
  @spec now() :: String.t()
  def now, do: DateTime.utc_now() |> DateTime.truncate(:millisecond) |> DateTime.to_iso8601()

  @doc """
  Writes `iodata` to `path` through a temporary file in the same directory,
  fsync and rename, so readers never see a partial file at `path`.
  """
  @spec write_atomically(Path.t(), iodata()) :: :ok | {:error, String.t()}
  def write_atomically(path, iodata) do
    path = Path.expand(path)

    # Renamed over `path` at the end: never over a device, FIFO or directory (as root, an output of
    # /dev/null would otherwise replace the device with a regular file).
    case File.lstat(path) do
      {:ok, %File.Stat{type: type}} when type != :regular ->
        {:error, "#{path} exists and is not a regular file: give the name of a file to write"}

      _ ->
        rename_into_place(path, iodata)
    end
  end

  defp rename_into_place(path, iodata) do
    tmp =
      Path.join(
        Path.dirname(path),
        ".#{Path.basename(path)}.#{System.unique_integer([:positive])}.tmp"
      )

    result =
      with {:ok, fd} <- :file.open(tmp, [:write, :raw, :binary]),
           :ok <- write_sync_close(fd, iodata) do
        :file.rename(tmp, path)
      end

    case result do
      :ok ->
        :ok

      {:error, reason} ->
        _ = :file.delete(tmp)
        {:error, "cannot write #{path}: #{:file.format_error(reason)}"}
    end
  end

  defp write_sync_close(fd, iodata) do
    result =
      with :ok <- :file.write(fd, iodata) do
        :file.sync(fd)
      end

    close = :file.close(fd)
    if result == :ok, do: close, else: result
  end

  defp drop_fv(header),
    do: Enum.reject(header, fn {k, _} -> k in [:format, :version, "format", "version"] end)

  defp fetch(header, key) do
    case List.keyfind(header, key, 0) do
      {_, v} -> v
      nil -> elem(List.keyfind(header, Atom.to_string(key), 0) || {nil, nil}, 1)
    end
  end

  @required [:workload, :variant, :runtime, :tool, :tool_version, :started_at]

  defp check_header(header) do
    missing =
      Enum.filter(@required ++ [:settings, :params, :columns], &(fetch(header, &1) == nil))

    cond do
      missing != [] ->
        {:error, "sample header lacks #{Enum.join(missing, ", ")}"}

      Enum.any?(@required, &(not is_binary(fetch(header, &1)))) ->
        {:error, "sample header fields #{Enum.join(@required, ", ")} must be strings"}

      not is_map(fetch(header, :settings)) or not is_map(fetch(header, :params)) ->
        {:error, "sample header settings and params must be maps"}

      true ->
        check_columns(fetch(header, :columns))
    end
  end

  defp check_columns([_ | _] = cols) do
    bad =
      Enum.reject(cols, fn c ->
        is_map(c) and is_binary(col(c, :name)) and col(c, :name) != "" and col(c, :unit) in @units and
          col(c, :type) in @types
      end)

    if bad == [],
      do: :ok,
      else:
        {:error,
         "bad column #{inspect(hd(bad))}: need a name, unit one of #{inspect(@units)}, type one of #{inspect(@types)}"}
  end

  defp check_columns(_), do: {:error, "sample header needs at least one column"}

  defp col(c, key), do: Map.get(c, key, Map.get(c, Atom.to_string(key)))

  defp check_records(records, ncols) do
    if rem(byte_size(records), 8 * ncols) == 0,
      do: :ok,
      else: {:error, "record bytes (#{byte_size(records)}) are not a multiple of #{8 * ncols}"}
  end
end

defmodule RtScope.SpawnOpts do
  @moduledoc """
  The process settings under test: `fullsweep_after`, `min_heap_size`,
  `priority` and `message_queue_data` of the measuring process.

  `validate/1` checks requested values, `spawn_options/1` turns them into
  `:erlang.spawn_opt/2` options, `observe/0` reads what is really in force
  from inside the process (`Process.info/2`), and `settings/2` and
  `notes/2` compare the two. The VM rounds `min_heap_size` up to its next
  heap size (34 becomes 233, 6765 becomes 6772): the request is kept as the
  setting, what the process got is in the header's `process` object, and a
  note says so.
  """

  @keys [:fullsweep_after, :min_heap_size, :priority, :message_queue_data]
  @priorities [:low, :normal, :high, :max]
  @mqd [:on_heap, :off_heap]

  @type requested :: %{optional(atom()) => non_neg_integer() | atom()}

  @doc "The option names this module handles."
  @spec keys() :: [atom()]
  def keys, do: @keys

  @doc "Valid `priority` values."
  def priorities, do: @priorities

  @doc "Valid `message_queue_data` values."
  def message_queue_data_values, do: @mqd

  # Largest small integer of this VM (the VM rejects bigger values).
  defp max_small, do: Bitwise.bsl(1, :erlang.system_info(:wordsize) * 8 - 5) - 1

  @doc """
  Picks and validates the spawn options out of `opts` (other keys are
  ignored). Atoms or strings are accepted for `priority` and
  `message_queue_data`.

      iex> RtScope.SpawnOpts.validate(priority: "high", fullsweep_after: 0, iterations: 5)
      {:ok, %{priority: :high, fullsweep_after: 0}}

      iex> RtScope.SpawnOpts.validate(priority: "urgent")
      {:error, "invalid priority \\"urgent\\": valid choices are low, normal, high, max"}

      iex> RtScope.SpawnOpts.validate(min_heap_size: -1)
      {:error, "invalid min_heap_size -1: must be an integer >= 0 (words)"}
  """
  @spec validate(keyword()) :: {:ok, requested()} | {:error, String.t()}
  def validate(opts) do
    Enum.reduce_while(@keys, {:ok, %{}}, fn key, {:ok, acc} ->
      case Keyword.fetch(opts, key) do
        :error ->
          {:cont, {:ok, acc}}

        {:ok, nil} ->
          {:cont, {:ok, acc}}

        {:ok, value} ->
          case check(key, value) do
            {:ok, v} -> {:cont, {:ok, Map.put(acc, key, v)}}
            {:error, _} = e -> {:halt, e}
          end
      end
    end)
  end

  defp check(key, v) when key in [:fullsweep_after, :min_heap_size] do
    unit = if key == :min_heap_size, do: "words", else: "minor collections"

    if is_integer(v) and v >= 0 and v <= max_small(),
      do: {:ok, v},
      else: {:error, "invalid #{key} #{inspect(v)}: must be an integer >= 0 (#{unit})"}
  end

  defp check(:priority, v), do: choice(:priority, v, @priorities)
  defp check(:message_queue_data, v), do: choice(:message_queue_data, v, @mqd)

  defp choice(key, v, valid) do
    found = Enum.find(valid, &(&1 == v or Atom.to_string(&1) == v))

    if found,
      do: {:ok, found},
      else: {:error, "invalid #{key} #{inspect(v)}: valid choices are #{Enum.join(valid, ", ")}"}
  end

  @doc """
  `:erlang.spawn_opt/2` options for the validated request.

      iex> RtScope.SpawnOpts.spawn_options(%{priority: :high, min_heap_size: 6765})
      [min_heap_size: 6765, priority: :high]
  """
  @spec spawn_options(requested()) :: keyword()
  def spawn_options(requested),
    do: for(k <- @keys, Map.has_key?(requested, k), do: {k, requested[k]})

  @doc """
  What is in force for the calling process, read with `Process.info/2`:
  priority, min_heap_size, fullsweep_after, message_queue_data and
  min_bin_vheap_size.
  """
  @spec observe() :: map()
  def observe do
    info =
      Process.info(self(), [:priority, :min_heap_size, :garbage_collection, :message_queue_data])

    gc = info[:garbage_collection]

    %{
      priority: info[:priority],
      min_heap_size: info[:min_heap_size],
      fullsweep_after: gc[:fullsweep_after],
      min_bin_vheap_size: gc[:min_bin_vheap_size],
      message_queue_data: info[:message_queue_data]
    }
  end

  @doc """
  The settings to record: the requested value of each option, or the value
  observed in force when it was not requested (the VM default).
  """
  @spec settings(requested(), map()) :: %{atom() => term()}
  def settings(requested, observed) do
    Map.new(@keys, fn k -> {k, value(Map.get(requested, k, observed[k]))} end)
  end

  defp value(a) when is_atom(a), do: Atom.to_string(a)
  defp value(v), do: v

  @doc """
  Notes for every requested option the process did not get exactly.

      iex> RtScope.SpawnOpts.notes(%{min_heap_size: 34}, %{min_heap_size: 233})
      ["min_heap_size 34 requested, the VM gave the process 233 (rounded up to a heap size)"]
  """
  @spec notes(requested(), map()) :: [String.t()]
  def notes(requested, observed) do
    for {k, v} <- requested, observed[k] != v do
      if k == :min_heap_size,
        do:
          "min_heap_size #{v} requested, the VM gave the process #{observed[k]} (rounded up to a heap size)",
        else: "#{k} #{v} requested, the process runs with #{observed[k]}"
    end
  end
end

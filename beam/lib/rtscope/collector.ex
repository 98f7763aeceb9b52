defmodule RtScope.Collector do
  @moduledoc """
  The output process: receives samples from a measuring process and packs
  them into records.

  The measuring process sends each sample as a tuple `{:s, v1, ..., vk}` of
  integers (one per column) right after it took its timestamps. Keeping the
  samples here, not in the measuring process, leaves that process's heap
  and garbage collections (which are measured) undisturbed, as in the study's
  eval/output flow. Values are packed as signed 64-bit little-endian.

  The measuring process ends with `finish/3`: sent by the same process after
  its last sample, it arrives after all of them (messages between two
  processes keep their order); the collector replies
  `{tag, :records, binary, count}` to `reply_to` and exits.

  `sync/1` waits until the collector has taken every sample sent before it
  (an interleaved arm calls it at the end of each block, so no arm's
  packing runs in another arm's block; `RtScope.Interleave`).
  """

  @doc """
  Starts a collector for records of `ncols` columns; returns `{pid, monitor_ref}`.
  Its message queue is kept off-heap so a long backlog costs no GC copying.
  """
  @spec start(pos_integer()) :: {pid(), reference()}
  def start(ncols) when is_integer(ncols) and ncols in 1..8 do
    :erlang.spawn_opt(fn -> loop(ncols, <<>>, 0) end, [:monitor, message_queue_data: :off_heap])
  end

  @doc "Asks the collector to reply `{tag, :records, binary, count}` to `reply_to` and stop."
  @spec finish(pid(), pid(), reference()) :: :ok
  def finish(collector, reply_to, tag) do
    send(collector, {:finish, reply_to, tag})
    :ok
  end

  @doc "Returns once `collector` has taken every sample the caller sent before."
  @spec sync(pid()) :: :ok
  def sync(collector) do
    ref = make_ref()
    send(collector, {:sync, self(), ref})

    receive do
      {^ref, :synced} -> :ok
    end
  end

  defp loop(1, acc, n) do
    receive do
      {:s, a} -> loop(1, <<acc::binary, a::little-signed-64>>, n + 1)
      {:finish, to, tag} -> send(to, {tag, :records, acc, n})
      {:sync, from, ref} -> synced(from, ref, fn -> loop(1, acc, n) end)
      other -> bad_sample(1, other)
    end
  end

  defp loop(2, acc, n) do
    receive do
      {:s, a, b} -> loop(2, <<acc::binary, a::little-signed-64, b::little-signed-64>>, n + 1)
      {:finish, to, tag} -> send(to, {tag, :records, acc, n})
      {:sync, from, ref} -> synced(from, ref, fn -> loop(2, acc, n) end)
      other -> bad_sample(2, other)
    end
  end

  defp loop(3, acc, n) do
    receive do
      {:s, a, b, c} ->
        loop(
          3,
          <<acc::binary, a::little-signed-64, b::little-signed-64, c::little-signed-64>>,
          n + 1
        )

      {:finish, to, tag} ->
        send(to, {tag, :records, acc, n})

      {:sync, from, ref} ->
        synced(from, ref, fn -> loop(3, acc, n) end)

      other ->
        bad_sample(3, other)
    end
  end

  defp loop(ncols, acc, n) do
    receive do
      {:finish, to, tag} ->
        send(to, {tag, :records, acc, n})

      sample
      when is_tuple(sample) and tuple_size(sample) == ncols + 1 and elem(sample, 0) == :s ->
        [:s | values] = Tuple.to_list(sample)
        loop(ncols, Enum.reduce(values, acc, &<<&2::binary, &1::little-signed-64>>), n + 1)

      {:sync, from, ref} ->
        synced(from, ref, fn -> loop(ncols, acc, n) end)

      other ->
        bad_sample(ncols, other)
    end
  end

  defp synced(from, ref, continue) do
    send(from, {ref, :synced})
    continue.()
  end

  # A sample of the wrong shape is a bug in a workload: stop loudly (the
  # harness monitors this process) rather than drop it.
  defp bad_sample(ncols, msg), do: exit({:bad_sample, ncols, msg})
end

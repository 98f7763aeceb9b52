defmodule RtScope.GcCounter do
  @moduledoc """
  Counts the garbage collections of one process exactly, by tracing.

  `Process.info(pid, :garbage_collection)[:minor_gcs]` is the number of
  minor collections *since the last full sweep* (the counter compared with
  `fullsweep_after`): it drops to 0 at every full sweep, so differences of
  it are no GC count. This module has the VM send a trace message to a
  small counting process at the start of every minor and major collection.

      counter = RtScope.GcCounter.start_self()
      # ... work ...
      %{minor: minor, major: major} = RtScope.GcCounter.stop_self(counter)

  Tracing costs one small message per collection; only the calling process
  is traced, and only between `start_self/0` and `stop_self/1`.
  """

  @doc "Starts counting the calling process's collections."
  @spec start_self() :: pid()
  def start_self do
    counter = spawn_link(fn -> count(0, 0) end)
    :erlang.trace(self(), true, [:garbage_collection, {:tracer, counter}])
    counter
  end

  @doc "Stops counting; returns `%{minor: n, major: m}` collections seen."
  @spec stop_self(pid()) :: %{minor: non_neg_integer(), major: non_neg_integer()}
  def stop_self(counter), do: RtScope.TraceSelf.stop(counter, [:garbage_collection])

  defp count(minor, major) do
    receive do
      {:trace, _pid, :gc_minor_start, _info} -> count(minor + 1, major)
      {:trace, _pid, :gc_major_start, _info} -> count(minor, major + 1)
      {:trace, _pid, _end_event, _info} -> count(minor, major)
      {:result, to, ref} -> send(to, {ref, %{minor: minor, major: major}})
    end
  end
end

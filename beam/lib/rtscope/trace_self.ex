defmodule RtScope.TraceSelf do
  @moduledoc """
  Ends tracing of the calling process and collects what its tracer process
  made of it (`RtScope.GcCounter`, `RtScope.Explain`): every trace message
  sent so far reaches the tracer before it is asked, by
  `erlang:trace_delivered/1`. The tracer answers `{:result, from, ref}` with
  `{ref, result}`.
  """

  @doc "Stops tracing `flags` of the calling process; returns the tracer's result."
  @spec stop(pid(), [atom()]) :: term()
  def stop(tracer, flags) do
    :erlang.trace(self(), false, flags)
    ref = :erlang.trace_delivered(self())

    receive do
      {:trace_delivered, _, ^ref} -> :ok
    end

    send(tracer, {:result, self(), ref})

    receive do
      {^ref, result} -> result
    end
  end
end

defmodule RtScope.Exec.Workloads do
  @moduledoc """
  The functions whose execution time the `exec` workload measures, exactly
  as in study 1.

      iex> RtScope.Exec.Workloads.sum(4000)
      8002000

      iex> RtScope.Exec.Workloads.fib(20)
      6765
  """

  @doc "Sum of 1..n through `Enum.reduce/2` (local data, allocation of a range walk)."
  @spec sum(pos_integer()) :: pos_integer()
  def sum(n), do: 1..n |> Enum.reduce(fn x, acc -> x + acc end)

  @doc "Naive recursive Fibonacci, fib(0) = 0, fib(1) = 1 (deep call stack)."
  @spec fib(non_neg_integer()) :: non_neg_integer()
  def fib(0), do: 0
  def fib(1), do: 1
  def fib(n), do: fib(n - 1) + fib(n - 2)

  @doc "`:timer.sleep(ms)` (timer accuracy)."
  @spec sleep(non_neg_integer()) :: :ok
  def sleep(ms), do: :timer.sleep(ms)

  @doc "An empty call: what the measurement itself costs."
  @spec nothing() :: :ok
  def nothing, do: :ok
end

defmodule RtScope.Options do
  @moduledoc """
  Validation of the options the workload APIs take, shared by
  `RtScope.Exec`, `RtScope.Timer` and `RtScope.MsgQ`.

  Every error is `{:error, {:invalid, message}}`, the message naming the
  option and what would be valid. Options common to all workloads:

    * `:output` – path of the sample file to write (optional in the API;
      without it nothing is written and the result is only returned)
    * `:fullsweep_after`, `:min_heap_size`, `:priority`,
      `:message_queue_data` – see `RtScope.SpawnOpts`
    * `:expect_vm_flags` – VM flags the caller started the VM with, e.g.
      `"+sbwt none"`: checked against the allowlist and against the flags
      really in force (`RtScope.VmFlags`)
  """

  alias RtScope.{SpawnOpts, VmFlags}

  @common [:output, :expect_vm_flags | SpawnOpts.keys()]

  @doc "The option names every workload accepts."
  def common_keys, do: @common

  @doc """
  Rejects keys outside `allowed` (plus the common ones).

      iex> RtScope.Options.check_keys([iterations: 1, bogus: 2], "exec", [:iterations])
      {:error, {:invalid, "unknown option bogus for exec; valid options are iterations, output, expect_vm_flags, fullsweep_after, min_heap_size, priority, message_queue_data"}}
  """
  @spec check_keys(keyword(), String.t(), [atom()]) :: :ok | {:error, {:invalid, String.t()}}
  def check_keys(opts, what, allowed) do
    valid = allowed ++ @common

    cond do
      not Keyword.keyword?(opts) ->
        invalid("options for #{what} must be a keyword list, got #{inspect(opts)}")

      bad = Enum.find(Keyword.keys(opts), &(&1 not in valid)) ->
        invalid("unknown option #{bad} for #{what}; valid options are #{Enum.join(valid, ", ")}")

      true ->
        :ok
    end
  end

  @doc """
  An integer option with a default and a lower bound.

      iex> RtScope.Options.integer([pause_ms: -1], :pause_ms, 5, 0)
      {:error, {:invalid, "invalid pause_ms -1: must be an integer >= 0"}}

      iex> RtScope.Options.integer([], :pause_ms, 5, 0)
      {:ok, 5}
  """
  @spec integer(keyword(), atom(), integer(), integer()) ::
          {:ok, integer()} | {:error, {:invalid, String.t()}}
  def integer(opts, key, default, min) do
    case Keyword.get(opts, key, default) do
      v when is_integer(v) and v >= min -> {:ok, v}
      v -> invalid("invalid #{key} #{inspect(v)}: must be an integer >= #{min}")
    end
  end

  @doc """
  Picks the variant out of `valid` (atoms), accepting an atom or a string.

      iex> RtScope.Options.variant("fib", "exec workload", [:sum, :fib])
      {:ok, :fib}

      iex> RtScope.Options.variant("fob", "exec workload", [:sum, :fib])
      {:error, {:invalid, "unknown exec workload \\"fob\\": valid choices are sum, fib"}}
  """
  @spec variant(atom() | String.t(), String.t(), [atom()]) ::
          {:ok, atom()} | {:error, {:invalid, String.t()}}
  def variant(v, what, valid) do
    case Enum.find(valid, &(&1 == v or Atom.to_string(&1) == v)) do
      nil -> invalid("unknown #{what} #{inspect(v)}: valid choices are #{Enum.join(valid, ", ")}")
      found -> {:ok, found}
    end
  end

  @doc """
  The options shared by all workloads, validated: `%{requested, output,
  expect_vm_flags}`. An `:output` must name a file in an existing directory.
  """
  @spec common(keyword()) :: {:ok, map()} | {:error, {:invalid, String.t()}}
  def common(opts) do
    with {:ok, requested} <- wrap(SpawnOpts.validate(opts)),
         {:ok, output} <- path(opts, :output),
         {:ok, flags} <- vm_flags(Keyword.get(opts, :expect_vm_flags)) do
      {:ok, %{requested: requested, output: output, expect_vm_flags: flags}}
    end
  end

  @doc "An optional output path: must not be a directory, its directory must exist."
  @spec path(keyword(), atom()) :: {:ok, Path.t() | nil} | {:error, {:invalid, String.t()}}
  def path(opts, key) do
    case Keyword.get(opts, key) do
      nil ->
        {:ok, nil}

      p when is_binary(p) and p != "" ->
        cond do
          File.dir?(p) ->
            invalid("invalid #{key} #{inspect(p)}: is a directory, give a file name")

          not File.dir?(Path.dirname(Path.expand(p))) ->
            invalid(
              "invalid #{key} #{inspect(p)}: directory #{Path.dirname(Path.expand(p))} does not exist"
            )

          true ->
            {:ok, p}
        end

      p ->
        invalid("invalid #{key} #{inspect(p)}: must be a file path")
    end
  end

  defp vm_flags(nil), do: {:ok, nil}

  defp vm_flags(s) when is_binary(s) do
    with {:ok, pairs} <- wrap(VmFlags.parse(s)),
         :ok <- wrap(VmFlags.check_in_force(pairs)) do
      {:ok, pairs}
    end
  end

  defp vm_flags(other),
    do: invalid("invalid expect_vm_flags #{inspect(other)}: must be a string like \"+sbwt none\"")

  @doc "Rejects `key` when it was given but does not apply to `variant`."
  @spec only_for(keyword(), atom(), atom(), [atom()], String.t()) ::
          :ok | {:error, {:invalid, String.t()}}
  def only_for(opts, key, variant, variants, what) do
    if Keyword.has_key?(opts, key) and variant not in variants,
      do:
        invalid(
          "option #{key} does not apply to #{what} #{variant} (only to #{Enum.join(variants, ", ")})"
        ),
      else: :ok
  end

  @doc """
  Maps `fun` over `list` while it returns `{:ok, value}`: `{:ok, values}`,
  or the first other return.

      iex> RtScope.Options.map_ok([1, 2], &{:ok, &1 * 2})
      {:ok, [2, 4]}

      iex> RtScope.Options.map_ok([1, -2, -3], &if(&1 > 0, do: {:ok, &1}, else: {:error, &1}))
      {:error, -2}
  """
  @spec map_ok(list(), (term() -> {:ok, term()} | term())) :: {:ok, list()} | term()
  def map_ok(list, fun) do
    Enum.reduce_while(list, {:ok, []}, fn x, {:ok, acc} ->
      case fun.(x) do
        {:ok, y} -> {:cont, {:ok, [y | acc]}}
        other -> {:halt, other}
      end
    end)
    |> case do
      {:ok, acc} -> {:ok, Enum.reverse(acc)}
      other -> other
    end
  end

  defp wrap({:error, msg}) when is_binary(msg), do: {:error, {:invalid, msg}}
  defp wrap(ok), do: ok

  defp invalid(msg), do: {:error, {:invalid, msg}}
end

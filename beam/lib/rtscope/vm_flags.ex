defmodule RtScope.VmFlags do
  @moduledoc """
  Erlang VM flags: the allowlist, parsing and validation of a flag string,
  and the flags the running VM was actually started with.

  The allowlist lives in `priv/vm_flags.json`, read here at compile time and
  by the Python side before it starts any VM, so both validate the same way.
  Every allowed flag takes exactly one value written as a separate word:
  `"+sbwt none +sbt db +hmqd off_heap"`.

  The flags in force are read from `:erlang.system_info(:emu_args)` (the
  emulator's own argument vector), so they are recorded even when they came
  from `ERL_FLAGS`, `ELIXIR_ERL_OPTIONS` or a Nerves `vm.args`.
  """

  alias RtScope.JSON

  @source Path.expand("../../priv/vm_flags.json", __DIR__)
  @external_resource @source
  {:ok, %{"flags" => flags}} = @source |> File.read!() |> JSON.decode()
  @allowlist flags

  @type flag_pair :: {String.t(), String.t()}

  @doc """
  The allowed flags: maps with `"flag"`, `"doc"` and either `"values"` (list
  of valid values) or `"pattern"` (a regex the value must fully match).
  """
  @spec allowlist() :: [map()]
  def allowlist, do: @allowlist

  @doc "The allowed flag names, e.g. `[\"+sbwt\", ...]`."
  @spec names() :: [String.t()]
  def names, do: Enum.map(@allowlist, & &1["flag"])

  @doc """
  Parses and validates a flag string against the allowlist.

      iex> RtScope.VmFlags.parse("+sbwt none  +hmqd off_heap")
      {:ok, [{"+sbwt", "none"}, {"+hmqd", "off_heap"}]}

      iex> RtScope.VmFlags.parse("+sbwt sometimes")
      {:error, "invalid value \\"sometimes\\" for VM flag +sbwt: valid values are none, very_short, short, medium, long, very_long"}
  """
  @spec parse(String.t()) :: {:ok, [flag_pair()]} | {:error, String.t()}
  def parse(string) when is_binary(string), do: string |> String.split() |> pairs([])

  defp pairs([], acc), do: {:ok, Enum.reverse(acc)}

  defp pairs([flag | rest], acc) do
    case Enum.find(@allowlist, &(&1["flag"] == flag)) do
      nil ->
        {:error, "unknown VM flag #{inspect(flag)}: valid flags are #{Enum.join(names(), ", ")}"}

      spec ->
        with {:ok, value, rest} <- take_value(spec, rest),
             :ok <- check_value(spec, value),
             :ok <- check_duplicate(flag, acc) do
          pairs(rest, [{flag, value} | acc])
        end
    end
  end

  defp take_value(spec, [value | rest]) do
    if String.starts_with?(value, "+"),
      do: {:error, "VM flag #{spec["flag"]} needs a value: #{describe(spec)}"},
      else: {:ok, value, rest}
  end

  defp take_value(spec, []),
    do: {:error, "VM flag #{spec["flag"]} needs a value: #{describe(spec)}"}

  defp check_value(%{"values" => values} = spec, value) do
    if value in values,
      do: :ok,
      else:
        {:error, "invalid value #{inspect(value)} for VM flag #{spec["flag"]}: #{describe(spec)}"}
  end

  defp check_value(%{"pattern" => pattern} = spec, value) do
    if Regex.match?(Regex.compile!(pattern), value),
      do: :ok,
      else:
        {:error, "invalid value #{inspect(value)} for VM flag #{spec["flag"]}: #{describe(spec)}"}
  end

  defp check_duplicate(flag, acc) do
    if List.keymember?(acc, flag, 0), do: {:error, "VM flag #{flag} given twice"}, else: :ok
  end

  defp describe(%{"values" => values}), do: "valid values are #{Enum.join(values, ", ")}"
  defp describe(%{"pattern" => p, "doc" => doc}), do: "the value must match #{p} (#{doc})"

  @doc """
  The emulator flags the running VM was started with, `+` form, in order.
  Flags without a value have `""` as value.
  """
  @spec in_force() :: [flag_pair()]
  def in_force do
    case :erlang.system_info(:emu_args) do
      [_program | args] ->
        args |> Enum.map(&List.to_string/1) |> Enum.take_while(&(&1 != "--")) |> group([])

      [] ->
        []
    end
  end

  # erlexec hands "+sbwt none" to the emulator as "-sbwt" "none".
  defp group([], acc), do: Enum.reverse(acc)

  defp group(["-" <> flag | rest], acc) do
    {values, rest} = Enum.split_while(rest, &(not String.starts_with?(&1, "-")))
    group(rest, [{"+" <> flag, Enum.join(values, " ")} | acc])
  end

  defp group([_stray | rest], acc), do: group(rest, acc)

  @doc """
  Formats flag pairs as one string.

      iex> RtScope.VmFlags.format([{"+sbwt", "none"}, {"+sbt", "db"}])
      "+sbwt none +sbt db"
  """
  @spec format([flag_pair()]) :: String.t()
  def format(pairs) do
    pairs
    |> Enum.map(fn
      {f, ""} -> f
      {f, v} -> f <> " " <> v
    end)
    |> Enum.join(" ")
  end

  @doc """
  Checks that every expected flag is in force in this VM with the same value.

      iex> RtScope.VmFlags.check_in_force([{"+sbwt", "none"}], [{"+sbwt", "none"}, {"+A", "1"}])
      :ok

      iex> RtScope.VmFlags.check_in_force([{"+sbwt", "none"}], [])
      {:error, "VM flags not in force in this VM: +sbwt none (flags in force: none); pass them to the VM, e.g. elixir --erl \\"+sbwt none\\""}
  """
  @spec check_in_force([flag_pair()], [flag_pair()]) :: :ok | {:error, String.t()}
  def check_in_force(expected, in_force \\ in_force()) do
    case expected -- in_force do
      [] ->
        :ok

      missing ->
        shown = if in_force == [], do: "none", else: format(in_force)

        {:error,
         "VM flags not in force in this VM: #{format(missing)} (flags in force: #{shown}); " <>
           "pass them to the VM, e.g. elixir --erl #{inspect(format(expected))}"}
    end
  end
end

defmodule RtScope.VmFlagsTest do
  use ExUnit.Case, async: true

  alias RtScope.VmFlags

  # A valid value for every flag that takes a pattern.
  @examples %{
    "+sfwi" => "0",
    "+S" => "2:2",
    "+SP" => "100:100",
    "+SDcpu" => "1:1",
    "+SDio" => "2",
    "+hms" => "233",
    "+hmbs" => "46422",
    "+hmax" => "0",
    "+A" => "1",
    "+P" => "262144",
    "+IOt" => "1",
    "+IOp" => "1"
  }

  test "every allowed flag and every listed value starts a real VM" do
    specs = VmFlags.allowlist()
    rounds = specs |> Enum.map(&length(Map.get(&1, "values", [nil]))) |> Enum.max()

    # Round i gives every flag its i-th value (wrapping): a few VM starts cover all values.
    for i <- 0..(rounds - 1) do
      flags =
        Enum.flat_map(specs, fn
          %{"flag" => f, "values" => vs} -> [f, Enum.at(vs, rem(i, length(vs)))]
          %{"flag" => f} -> [f, Map.fetch!(@examples, f)]
        end)

      assert {:ok, _} = VmFlags.parse(Enum.join(flags, " "))

      {out, status} =
        System.cmd("erl", flags ++ ["-noshell", "-eval", "halt(0)."], stderr_to_stdout: true)

      assert status == 0, "erl #{Enum.join(flags, " ")}: #{out}"
    end
  end

  test "an unknown flag does stop a VM (why the allowlist is checked before starting one)" do
    {out, status} =
      System.cmd("erl", ["+zzz", "1", "-noshell", "-eval", "halt(0)."], stderr_to_stdout: true)

    assert status != 0
    assert out =~ "zzz"
  end
end

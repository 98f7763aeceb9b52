defmodule RtScope.OptionsTest do
  use ExUnit.Case, async: true

  alias RtScope.{Options, SpawnOpts, VmFlags}

  doctest RtScope.Options
  doctest RtScope.SpawnOpts
  doctest RtScope.VmFlags

  test "spawn options: every bad value names the valid choices" do
    assert {:error, "invalid message_queue_data \"in_heap\": valid choices are on_heap, off_heap"} =
             SpawnOpts.validate(message_queue_data: "in_heap")

    assert {:error, "invalid fullsweep_after \"0\": must be an integer >= 0 (minor collections)"} =
             SpawnOpts.validate(fullsweep_after: "0")

    assert {:error, "invalid fullsweep_after " <> _} =
             SpawnOpts.validate(fullsweep_after: Bitwise.bsl(1, 62))

    assert {:ok, %{priority: :max, message_queue_data: :off_heap}} =
             SpawnOpts.validate(priority: :max, message_queue_data: :off_heap)
  end

  test "settings fill unrequested options with what is in force" do
    observed = %{
      priority: :normal,
      min_heap_size: 233,
      fullsweep_after: 65535,
      message_queue_data: :on_heap
    }

    assert SpawnOpts.settings(%{priority: :high}, observed) ==
             %{
               priority: "high",
               min_heap_size: 233,
               fullsweep_after: 65535,
               message_queue_data: "on_heap"
             }
  end

  test "output paths must be files in existing directories" do
    assert {:error,
            {:invalid,
             "invalid output \"/nonexistent-dir/x.rts\": directory /nonexistent-dir does not exist"}} =
             Options.path([output: "/nonexistent-dir/x.rts"], :output)

    assert {:error, {:invalid, "invalid output \"/tmp\": is a directory" <> _}} =
             Options.path([output: "/tmp"], :output)
  end

  describe "VM flags" do
    test "allowlist is well formed and every entry validates its own examples" do
      for spec <- VmFlags.allowlist() do
        assert "+" <> _ = spec["flag"]
        assert is_binary(spec["doc"])

        case spec do
          %{"values" => [v | _]} ->
            assert {:ok, [{_, ^v}]} = VmFlags.parse("#{spec["flag"]} #{v}")

          %{"pattern" => p} ->
            assert {:ok, _} = Regex.compile(p)
        end
      end
    end

    test "bad flag strings are refused with the valid choices" do
      assert {:error, "unknown VM flag \"+zzz\": valid flags are +sbwt, " <> _} =
               VmFlags.parse("+zzz 1")

      assert {:error, "VM flag +sbwt needs a value: valid values are none" <> _} =
               VmFlags.parse("+sbwt")

      assert {:error, "VM flag +sbwt needs a value" <> _} = VmFlags.parse("+sbwt +sbt db")

      assert {:error, "invalid value \"0\" for VM flag +S: the value must match" <> _} =
               VmFlags.parse("+S 0")

      assert {:ok, [{"+S", "2:1"}]} = VmFlags.parse("+S 2:1")
      assert {:error, "VM flag +sbt given twice"} = VmFlags.parse("+sbt db +sbt u")
      assert {:ok, []} = VmFlags.parse("  ")
    end

    test "flags in force are read from the emulator's arguments" do
      in_force = VmFlags.in_force()
      assert is_list(in_force)
      assert Enum.all?(in_force, fn {"+" <> _, v} -> is_binary(v) end)
      assert :ok = VmFlags.check_in_force([], in_force)
    end
  end
end

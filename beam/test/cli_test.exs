defmodule RtScope.CLITest do
  use ExUnit.Case, async: false

  alias RtScope.Test.SampleReader

  import RtScope.Test.CLIRunner, only: [cli: 1]

  @moduletag :tmp_dir

  test "exec run writes the file and the CSV", %{tmp_dir: dir} do
    out = Path.join(dir, "x.rts")
    csv = Path.join(dir, "x.csv")

    assert {0, stdout, ""} =
             cli(
               ~w(exec sum --iterations 20 --pause-ms 0 --fullsweep-after 0 --priority high --output #{out} --csv #{csv})
             )

    assert stdout =~ "exec sum: 20 samples written to #{out}"
    assert {:ok, %{count: 20, header: h}} = SampleReader.read(out)
    assert h["settings"]["priority"] == "high"
    assert h["settings"]["fullsweep_after"] == 0
    assert File.read!(csv) =~ ~r/\Acount,time,heap_size,minor_gcs\n1,/
  end

  test "timer and msgq through the CLI", %{tmp_dir: dir} do
    t = Path.join(dir, "t.rts")
    m = Path.join(dir, "m.rts")
    assert {0, _, ""} = cli(~w(timer send_after --cycles 5 --interval-ms 2 --output #{t}))

    assert {0, _, ""} =
             cli(
               ~w(msgq fan_in --senders 2 --messages 3 --work 0 --message-queue-data off_heap --output #{m})
             )

    assert {:ok, %{count: 5}} = SampleReader.read(t)

    assert {:ok, %{count: 6, header: %{"settings" => %{"message_queue_data" => "off_heap"}}}} =
             SampleReader.read(m)
  end

  test "min_heap_size rounding is reported as a note", %{tmp_dir: dir} do
    out = Path.join(dir, "x.rts")

    assert {0, _, err} =
             cli(~w(exec nothing --iterations 2 --pause-ms 0 --min-heap-size 34 --output #{out}))

    assert err =~ "note: min_heap_size 34 requested, the VM gave the process 233"
  end

  test "bad usage: exit 2, the valid choices named, no file", %{tmp_dir: dir} do
    out = Path.join(dir, "bad.rts")

    cases = [
      {~w(exec sum --priority urgent),
       "invalid priority \"urgent\": valid choices are low, normal, high, max"},
      {~w(exec sum --min-heap-size -1),
       "invalid min_heap_size -1: must be an integer >= 0 (words)"},
      {~w(exec sum --message-queue-data heap), "valid choices are on_heap, off_heap"},
      {~w(exec sum --iterations ten),
       "invalid value \"ten\" for --iterations: expected an integer"},
      {~w(exec sum --cycles 3),
       "unknown option --cycles for exec sum; valid options are --iterations,"},
      {~w(exec sum extra), "unexpected argument \"extra\""},
      {~w(exec summ),
       "unknown exec workload \"summ\": valid choices are sum, fib, sleep, nothing"},
      {~w(timer nanosleep),
       "unknown timer variant \"nanosleep\": valid choices are send_after, receive_after, timer_sleep"},
      {~w(msgq pmap --senders 3), "unknown option --senders for msgq pmap"},
      {~w(exec nothing --n 3),
       "option n does not apply to exec nothing (only to sum, fib, sleep, dirty, port, spawn_each, spawn_recursive)"},
      {~w(exec sum --vm-flags +zzz), "unknown VM flag \"+zzz\": valid flags are +sbwt,"},
      {["exec", "sum", "--vm-flags", "+sbwt sometimes"],
       "invalid value \"sometimes\" for VM flag +sbwt"}
    ]

    for {argv, expected} <- cases do
      assert {2, "", err} = cli(argv ++ ["--output", out]), inspect(argv)
      assert err =~ expected, "#{inspect(argv)}: #{err}"
    end

    assert {2, "", err} = cli(~w(iot sum --output #{out}))
    assert err =~ "unknown workload \"iot\": valid choices are exec, timer, msgq, gpio, tasks"
    assert {2, "", err} = cli(~w(exec sum --iterations 3))
    assert err =~ "missing --output FILE"
    assert {2, "", err} = cli(~w(exec sum --output #{dir}/no/such/dir/x.rts))
    assert err =~ "does not exist"
    assert {2, "", _} = cli([])
    assert {2, "", _} = cli(["exec"])
    refute File.exists?(out)
  end

  test "a failed measurement: exit 1, the reason on stderr, no file" do
    # /proc exists but takes no new files, even for root.
    assert {1, "", err} =
             cli(~w(exec nothing --iterations 2 --pause-ms 0 --output /proc/rtscope-test.rts))

    assert err =~ "exec nothing failed: cannot write /proc/rtscope-test.rts"
    refute File.exists?("/proc/rtscope-test.rts")
  end

  test "VM flags that are not in force are refused", %{tmp_dir: dir} do
    out = Path.join(dir, "x.rts")
    # mix test does not start the VM with +sbwt none
    refute {"+sbwt", "none"} in RtScope.VmFlags.in_force()
    assert {2, "", err} = cli(["exec", "nothing", "--vm-flags", "+sbwt none", "--output", out])
    assert err =~ "VM flags not in force in this VM: +sbwt none"
    refute File.exists?(out)
  end

  test "help, version and the VM flag allowlist" do
    assert {0, help, ""} = cli(["help"])
    assert help =~ "usage: rtscope-beam WORKLOAD VARIANT"
    assert {0, "rtscope-beam 0.1.0\n", ""} = cli(["--version"])
    assert {0, json, ""} = cli(["vm-flags"])
    assert {:ok, list} = RtScope.JSON.decode(json)
    assert Enum.map(list, & &1["flag"]) == RtScope.VmFlags.names()
  end

  describe "a real VM started as the Python side does" do
    # One VM start costs ~0.5 s: a few cases only.
    defp vm(erl_flags, argv) do
      ebin = Path.join(Mix.Project.app_path(), "ebin")

      args = [
        "--erl",
        erl_flags,
        "-pa",
        ebin,
        "-e",
        "RtScope.CLI.main(System.argv())",
        "--" | argv
      ]

      System.cmd("elixir", args, stderr_to_stdout: true, env: [{"ERL_CRASH_DUMP_SECONDS", "0"}])
    end

    test "VM flags given with --erl are in force, checked and recorded", %{tmp_dir: dir} do
      out = Path.join(dir, "vm.rts")
      flags = "+sbwt none +hmqd off_heap"

      assert {text, 0} =
               vm(
                 flags,
                 ~w(exec nothing --iterations 10 --pause-ms 0 --output #{out}) ++
                   ["--vm-flags", flags]
               )

      assert text =~ "10 samples written"
      assert {:ok, %{header: h}} = SampleReader.read(out)
      assert h["settings"]["vm_flags"] == flags
      assert h["vm"]["default_message_queue_data"] == "off_heap"
      # +hmqd off_heap is the default of new processes: the measuring process has it too
      assert h["settings"]["message_queue_data"] == "off_heap"
    end

    test "exit status 2 on bad usage", %{tmp_dir: dir} do
      out = Path.join(dir, "bad.rts")
      assert {text, 2} = vm("", ~w(exec sum --priority urgent --output #{out}))
      assert text =~ "valid choices are low, normal, high, max"
      assert {text, 2} = vm("+sbwt none", ~w(exec nothing --vm-flags +sbwt --output #{out}))
      assert text =~ "VM flag +sbwt needs a value"
      refute File.exists?(out)
    end
  end
end

defmodule RtScope.GpioTest do
  # The GPIO itself is tested on the virtual Raspberry Pi 3's PL061 (tests/test_gpio.py): this machine's
  # kernel has no GPIO. Here: what needs none.
  use ExUnit.Case, async: true

  alias RtScope.Gpio

  @rtprobe Path.expand("../../probes/build/rtprobe", __DIR__)
  @moduletag :tmp_dir

  test "bad options are refused before anything runs", %{tmp_dir: dir} do
    out = Path.join(dir, "g.rts")

    assert {:error, {:invalid, "missing rtprobe: the path of the GPIO port program" <> _}} =
             Gpio.run(:write, output: out)

    assert {:error,
            {:invalid,
             "unknown gpio variant \"toggle\": valid choices are write, read, blink, " <>
               "genserver_write"}} = Gpio.run("toggle", rtprobe: @rtprobe)

    assert {:error, {:invalid, "option period_ms does not apply to gpio write (only to blink)"}} =
             Gpio.run(:write, rtprobe: @rtprobe, period_ms: 5)

    assert {:error, {:invalid, "option csv does not apply to gpio read" <> _}} =
             Gpio.run(:read, rtprobe: @rtprobe, csv: Path.join(dir, "g.csv"))

    refute File.exists?(out)
  end

  test "a port program or chip that is not there: said, nothing written", %{tmp_dir: dir} do
    out = Path.join(dir, "g.rts")

    assert {:error, {:failed, "cannot start /no/rtprobe: no such file or directory" <> _}} =
             Gpio.run(:write, rtprobe: "/no/rtprobe", output: out)

    chip = Path.join(dir, "gpiochip9")

    assert {:error, {:failed, "no GPIO chip " <> rest}} =
             Gpio.run(:blink, rtprobe: @rtprobe, chip: chip, output: out)

    assert rest =~ "#{chip}; chips here: "
    refute File.exists?(out)
  end

  test "the nerves_rt_perf CSV of a write run" do
    recs =
      <<2499::little-signed-64, 1501::little-signed-64, 233::little-signed-64,
        0::little-signed-64>>

    assert recs
           |> RtScope.Exec.CSV.encode(
             ["time_for_write_1", "time_for_write_0", "heap_size", "minor_gcs"],
             2
           )
           |> IO.iodata_to_binary() ==
             "count,time_for_write_1,time_for_write_0,heap_size,minor_gcs\n1,2,2,233,0\n"
  end
end

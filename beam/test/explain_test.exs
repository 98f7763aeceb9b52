defmodule RtScope.ExplainTest do
  use ExUnit.Case, async: true

  alias RtScope.{Exec, Explain}

  test "attribute/4 splits an interval into collections and times scheduled out" do
    events = [
      {100, :in, 2},
      {150, :gc_start, {:gc_major_start, 900}},
      {250, :gc_end, 40},
      {300, :out, 2},
      {420, :in, 3},
      {500, :gc_start, {:gc_minor_start, 300}},
      {530, :gc_end, 120}
    ]

    {got, sched} = Explain.attribute(events, 120, 600)
    assert sched == 3
    assert [out, major, minor] = got.causes

    assert %{
             kind: "gc",
             name: "major",
             duration_ns: 100,
             heap_before: 900,
             heap_after: 40,
             count: 1
           } = major

    assert %{kind: "scheduled_out", duration_ns: 120, count: 1, intervals: [[180, 300]]} = out
    assert %{kind: "gc", name: "minor", duration_ns: 30} = minor
    assert got.self_ns == 480 - 250
  end

  test "an exec run with explain keeps the worst samples' collections in its trailer" do
    {:ok, result} =
      Exec.run(:spawn_each, iterations: 8, pause_ms: 0, n: 2000, fullsweep_after: 0, explain: 2)

    explain = Keyword.fetch!(result.trailer, :explain)
    assert [a, b] = explain.samples
    assert a.value_ns >= b.value_ns
    assert Enum.any?(a.causes, &(&1.kind == "gc" and &1.name == "major"))
    assert a.self_ns + Enum.reduce(a.causes, 0, &(&1.duration_ns + &2)) == a.value_ns
  end
end

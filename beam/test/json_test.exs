defmodule RtScope.JSONTest do
  use ExUnit.Case, async: true

  alias RtScope.JSON

  doctest RtScope.JSON

  test "round trip of nested values, unicode and escapes" do
    value = %{
      "s" => "tab\t quote\" back\\ nl\n bell\a é 日本 😀",
      "n" => [0, -1, 123_456_789_012_345, 1.5, -2.0e-7, 1.0e300],
      "b" => [true, false, nil],
      "o" => %{"empty" => %{}, "list" => []}
    }

    assert {:ok, ^value} = value |> JSON.encode!() |> JSON.decode()
  end

  test "control characters are escaped, output is plain ASCII for ASCII input" do
    assert JSON.encode!(<<1, 31>>) == ~s("\\u0001\\u001F")
    assert JSON.decode(~s("\\u0001\\u001f")) == {:ok, <<1, 31>>}
  end

  test "surrogate pairs decode to one code point" do
    assert JSON.decode(~s("\\ud83d\\ude00")) == {:ok, "😀"}
    assert {:error, "invalid JSON at byte 1: unpaired surrogate"} = JSON.decode(~s("\\ud83d"))
  end

  test "keyword lists keep their order, maps are sorted" do
    assert JSON.encode!(z: 1, a: 2) == ~s({"z":1,"a":2})
    assert JSON.encode!(%{"z" => 1, "a" => 2}) == ~s({"a":2,"z":1})
    assert JSON.encode!([]) == "[]"
    assert JSON.encode!([1, {:a, 2}] |> Enum.take(1)) == "[1]"
  end

  test "numbers follow the JSON grammar" do
    assert JSON.decode("1e3") == {:ok, 1.0e3}
    assert JSON.decode("-0.5E-2") == {:ok, -0.005}
    assert {:error, _} = JSON.decode("01")
    assert {:error, _} = JSON.decode("1.")
    assert {:error, _} = JSON.decode("+1")
    assert {:error, "invalid JSON at byte 0: number out of range" <> _} = JSON.decode("1e400")
  end

  test "malformed input names the position" do
    assert JSON.decode(~s({"a" 1})) ==
             {:error, "invalid JSON at byte 5: unexpected character '1'"}

    assert JSON.decode(~s({"a": 1} x)) == {:error, "invalid JSON at byte 9: trailing data"}
    assert JSON.decode(~s("abc)) == {:error, "invalid JSON at byte 4: unterminated string"}
    assert JSON.decode("") == {:error, "invalid JSON at byte 0: unexpected end of input"}
    assert {:error, _} = JSON.decode(<<?", 0xFF, ?">>)
  end

  test "terms JSON cannot hold are refused" do
    assert {:error, "cannot encode {1, 2} as JSON"} = JSON.encode({1, 2})
    assert {:error, "cannot encode <<255>> as JSON: not valid UTF-8"} = JSON.encode(<<255>>)
    assert_raise ArgumentError, fn -> JSON.encode!(%{1 => 2}) end
  end
end

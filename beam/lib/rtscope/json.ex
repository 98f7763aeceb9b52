defmodule RtScope.JSON do
  @moduledoc """
  A small JSON (RFC 8259) encoder and decoder.

  OTP 25 has no `:json` module and rtscope uses no hex packages, so the
  sample-file headers and trailers are written (and, in tests, read back)
  with this module.

  Encoding:

    * `nil` → `null`, `true`/`false`, other atoms → strings
    * integers, floats (shortest round-trip form)
    * UTF-8 binaries → strings (invalid UTF-8 raises `ArgumentError`)
    * maps → objects with keys sorted, so output is deterministic
    * keyword lists and lists of `{key, value}` pairs → objects in the
      given order (how headers keep a readable key order)
    * other lists → arrays

  Decoding returns maps with string keys, lists, integers, floats,
  strings, booleans and `nil`.

      iex> RtScope.JSON.encode!(%{b: [1, 2.5, nil], a: "x\\ny"})
      ~s({"a":"x\\\\ny","b":[1,2.5,null]})

      iex> RtScope.JSON.encode!(format: "rtscope-samples", version: 1)
      ~s({"format":"rtscope-samples","version":1})

      iex> RtScope.JSON.decode(~s({"a": [1, -2.5e1, true, null, "\\\\u00e9"]}))
      {:ok, %{"a" => [1, -25.0, true, nil, "é"]}}

      iex> RtScope.JSON.decode("[1,]")
      {:error, "invalid JSON at byte 3: unexpected character ']'"}
  """

  @doc "Encodes `term` as a JSON binary; raises `ArgumentError` on terms JSON cannot represent."
  @spec encode!(term()) :: binary()
  def encode!(term), do: term |> enc() |> IO.iodata_to_binary()

  @doc "Like `encode!/1` but returns `{:ok, json}` or `{:error, message}`."
  @spec encode(term()) :: {:ok, binary()} | {:error, String.t()}
  def encode(term) do
    {:ok, encode!(term)}
  rescue
    e in ArgumentError -> {:error, Exception.message(e)}
  end

  defp enc(nil), do: "null"
  defp enc(true), do: "true"
  defp enc(false), do: "false"
  defp enc(a) when is_atom(a), do: string(Atom.to_string(a))
  defp enc(i) when is_integer(i), do: Integer.to_string(i)
  defp enc(f) when is_float(f), do: Float.to_string(f)
  defp enc(s) when is_binary(s), do: string(s)

  defp enc(m) when is_map(m) and not is_struct(m) do
    m |> Enum.map(fn {k, v} -> {key(k), v} end) |> Enum.sort() |> object()
  end

  defp enc([{k, _} | _] = pairs) when is_atom(k) or is_binary(k) do
    if Enum.all?(pairs, &pair?/1) do
      pairs |> Enum.map(fn {k, v} -> {key(k), v} end) |> object()
    else
      array(pairs)
    end
  end

  defp enc(l) when is_list(l), do: array(l)

  defp enc(other) do
    raise ArgumentError, "cannot encode #{inspect(other)} as JSON"
  end

  defp pair?({k, _}) when is_atom(k) or is_binary(k), do: true
  defp pair?(_), do: false

  defp key(k) when is_binary(k), do: k
  defp key(k) when is_atom(k) and k not in [nil, true, false], do: Atom.to_string(k)
  defp key(k), do: raise(ArgumentError, "cannot use #{inspect(k)} as a JSON object key")

  defp object([]), do: "{}"

  defp object(pairs) do
    body = pairs |> Enum.map(fn {k, v} -> [string(k), ?:, enc(v)] end) |> Enum.intersperse(?,)
    [?{, body, ?}]
  end

  defp array(list), do: [?[, list |> Enum.map(&enc/1) |> Enum.intersperse(?,), ?]]

  defp string(s) do
    unless String.valid?(s) do
      raise ArgumentError, "cannot encode #{inspect(s)} as JSON: not valid UTF-8"
    end

    [?", escape(s, s, 0, 0, []), ?"]
  end

  # Copies runs of characters that need no escaping as sub-binaries.
  defp escape(<<>>, orig, start, len, acc), do: [acc | binary_part(orig, start, len)]

  defp escape(<<c, rest::binary>>, orig, start, len, acc) when c < 0x20 or c == ?" or c == ?\\ do
    acc = [acc, binary_part(orig, start, len) | esc(c)]
    escape(rest, orig, start + len + 1, 0, acc)
  end

  defp escape(<<_, rest::binary>>, orig, start, len, acc),
    do: escape(rest, orig, start, len + 1, acc)

  defp esc(?"), do: "\\\""
  defp esc(?\\), do: "\\\\"
  defp esc(?\n), do: "\\n"
  defp esc(?\r), do: "\\r"
  defp esc(?\t), do: "\\t"
  defp esc(?\b), do: "\\b"
  defp esc(?\f), do: "\\f"

  defp esc(c) do
    hex = c |> Integer.to_string(16) |> String.pad_leading(4, "0")
    "\\u" <> hex
  end

  @doc """
  Decodes one JSON value (surrounded by optional whitespace).

  Returns `{:ok, term}` or `{:error, message}` naming the byte offset.
  """
  @spec decode(binary()) :: {:ok, term()} | {:error, String.t()}
  def decode(bin) when is_binary(bin) do
    {value, rest} = value(skip_ws(bin), bin)

    case skip_ws(rest) do
      "" -> {:ok, value}
      trailing -> fail(bin, trailing, "trailing data")
    end
  catch
    {:json_error, msg} -> {:error, msg}
  end

  defp value(<<?{, rest::binary>>, all), do: object_members(skip_ws(rest), all, [])
  defp value(<<?[, rest::binary>>, all), do: array_items(skip_ws(rest), all, [])
  defp value(<<?", rest::binary>>, all), do: string_chars(rest, all, [])
  defp value(<<"true", rest::binary>>, _), do: {true, rest}
  defp value(<<"false", rest::binary>>, _), do: {false, rest}
  defp value(<<"null", rest::binary>>, _), do: {nil, rest}
  defp value(<<c, _::binary>> = bin, all) when c == ?- or c in ?0..?9, do: number(bin, all)
  defp value(rest, all), do: unexpected(all, rest)

  defp object_members(<<?}, rest::binary>>, _all, []), do: {%{}, rest}

  defp object_members(<<?", rest::binary>>, all, acc) do
    {k, rest} = string_chars(rest, all, [])

    rest =
      case skip_ws(rest) do
        <<?:, r::binary>> -> skip_ws(r)
        other -> unexpected(all, other)
      end

    {v, rest} = value(rest, all)
    acc = [{k, v} | acc]

    case skip_ws(rest) do
      <<?,, r::binary>> -> object_members(skip_ws(r), all, acc)
      <<?}, r::binary>> -> {Map.new(acc), r}
      other -> unexpected(all, other)
    end
  end

  defp object_members(rest, all, _), do: unexpected(all, rest)

  defp array_items(<<?], rest::binary>>, _all, []), do: {[], rest}

  defp array_items(bin, all, acc) do
    {v, rest} = value(bin, all)
    acc = [v | acc]

    case skip_ws(rest) do
      <<?,, r::binary>> -> array_items(skip_ws(r), all, acc)
      <<?], r::binary>> -> {Enum.reverse(acc), r}
      other -> unexpected(all, other)
    end
  end

  defp string_chars(<<?", rest::binary>>, _all, acc) do
    {IO.iodata_to_binary(Enum.reverse(acc)), rest}
  end

  defp string_chars(<<?\\, e, rest::binary>>, all, acc) when e in ~c("\\/bfnrt) do
    c = %{?" => ?", ?\\ => ?\\, ?/ => ?/, ?b => ?\b, ?f => ?\f, ?n => ?\n, ?r => ?\r, ?t => ?\t}
    string_chars(rest, all, [c[e] | acc])
  end

  defp string_chars(<<"\\u", h::binary-size(4), rest::binary>> = bin, all, acc) do
    cp = hex4(h, all, bin)

    cond do
      cp in 0xD800..0xDBFF ->
        case rest do
          <<"\\u", l::binary-size(4), rest2::binary>> ->
            lo = hex4(l, all, rest)

            if lo in 0xDC00..0xDFFF do
              c = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
              string_chars(rest2, all, [<<c::utf8>> | acc])
            else
              fail(all, bin, "unpaired surrogate")
            end

          _ ->
            fail(all, bin, "unpaired surrogate")
        end

      cp in 0xDC00..0xDFFF ->
        fail(all, bin, "unpaired surrogate")

      true ->
        string_chars(rest, all, [<<cp::utf8>> | acc])
    end
  end

  defp string_chars(<<c, _::binary>> = bin, all, _acc) when c < 0x20 or c == ?\\ do
    fail(all, bin, "invalid character in string")
  end

  defp string_chars(<<c::utf8, rest::binary>>, all, acc),
    do: string_chars(rest, all, [<<c::utf8>> | acc])

  defp string_chars(<<>>, all, _acc), do: fail(all, <<>>, "unterminated string")
  defp string_chars(bin, all, _acc), do: fail(all, bin, "invalid UTF-8 in string")

  defp hex4(<<a, b, c, d>> = h, all, at) do
    if Enum.all?([a, b, c, d], &(&1 in ?0..?9 or &1 in ?a..?f or &1 in ?A..?F)) do
      String.to_integer(h, 16)
    else
      fail(all, at, "invalid \\u escape")
    end
  end

  defp number(bin, all) do
    {text, rest} = take_number(bin, [])

    case Regex.run(~r/\A-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?\z/, text) do
      [^text] ->
        {String.to_integer(text), rest}

      [^text | groups] ->
        {to_float(text, groups, all, bin), rest}

      nil ->
        fail(all, bin, "invalid number #{inspect(text)}")
    end
  end

  defp to_float(text, [frac | exp], all, at) do
    # :erlang.binary_to_float/1 needs a fraction part: "1e5" -> "1.0e5".
    normal =
      if frac == "" do
        [mant | _] = String.split(text, ["e", "E"], parts: 2)
        mant <> ".0" <> Enum.join(exp)
      else
        text
      end

    try do
      String.to_float(normal)
    rescue
      ArgumentError -> fail(all, at, "number out of range #{inspect(text)}")
    end
  end

  defp take_number(<<c, rest::binary>>, acc) when c in ~c(+-.eE0123456789),
    do: take_number(rest, [c | acc])

  defp take_number(rest, acc), do: {acc |> Enum.reverse() |> List.to_string(), rest}

  defp skip_ws(<<c, rest::binary>>) when c in ~c( \t\r\n), do: skip_ws(rest)
  defp skip_ws(rest), do: rest

  defp unexpected(all, <<>>), do: fail(all, <<>>, "unexpected end of input")

  defp unexpected(all, <<c::utf8, _::binary>> = rest),
    do: fail(all, rest, "unexpected character '#{<<c::utf8>>}'")

  defp unexpected(all, rest), do: fail(all, rest, "unexpected byte")

  defp fail(all, rest, msg) do
    throw({:json_error, "invalid JSON at byte #{byte_size(all) - byte_size(rest)}: #{msg}"})
  end
end

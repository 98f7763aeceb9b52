defmodule RtScope.VmInfo do
  @moduledoc """
  Facts about the running Erlang VM, recorded with every run: versions,
  schedulers, the flags it was started with, its clock source.

  `settings/0` gives the few that belong among a run's settings (they change
  results and are what people vary); `facts/0` gives the full set, stored in
  the header's `vm` object.
  """

  alias RtScope.VmFlags

  @doc "The VM settings recorded in a run's `settings`."
  @spec settings() :: map()
  def settings do
    %{
      vm_flags: VmFlags.format(VmFlags.in_force()),
      otp_release: List.to_string(:erlang.system_info(:otp_release)),
      elixir_version: System.version(),
      schedulers_online: :erlang.system_info(:schedulers_online)
    }
  end

  @doc "Everything recorded in the header's `vm` object."
  @spec facts() :: map()
  def facts do
    clock = :erlang.system_info(:os_monotonic_time_source)

    %{
      erts_version: List.to_string(:erlang.system_info(:version)),
      otp_release: List.to_string(:erlang.system_info(:otp_release)),
      elixir_version: System.version(),
      system_architecture: List.to_string(:erlang.system_info(:system_architecture)),
      emu_flavor: :erlang.system_info(:emu_flavor),
      wordsize_bytes: :erlang.system_info(:wordsize),
      schedulers: :erlang.system_info(:schedulers),
      schedulers_online: :erlang.system_info(:schedulers_online),
      dirty_cpu_schedulers_online: :erlang.system_info(:dirty_cpu_schedulers_online),
      logical_processors_available: available(:erlang.system_info(:logical_processors_available)),
      scheduler_bind_type: :erlang.system_info(:scheduler_bind_type),
      default_message_queue_data: :erlang.system_info(:message_queue_data),
      time_correction: :erlang.system_info(:time_correction),
      time_warp_mode: :erlang.system_info(:time_warp_mode),
      monotonic_clock: "#{clock[:function]}(#{clock[:clock_id]})",
      monotonic_clock_resolution_hz: clock[:resolution],
      vm_flags: VmFlags.format(VmFlags.in_force())
    }
  end

  defp available(n) when is_integer(n), do: n
  defp available(_unknown), do: nil

  # Compiled in rather than read from rtscope.app: on a BEAM node target the
  # modules are loaded one by one, with no application file.
  @version Mix.Project.config()[:version]

  @doc "This harness's version (the `:rtscope` project version)."
  @spec tool_version() :: String.t()
  def tool_version, do: @version
end

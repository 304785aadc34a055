// Which of a CA name and a port number is wrong when a umad call fails.
// libibumad cannot say: umad_get_port reads the port's sysfs directory directly
// and answers EIO both for a CA that does not exist and for a port the CA does
// not have (and umad_open_port answers EIO when the umad device cannot be
// opened). The caller lists what exists; this decides, without I/O.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdma_asio::detail {

/// One CA as libibumad sees it: its name and the numbers of its ports.
struct umad_ca_ports {
    std::string name;
    std::vector<int> ports;
};

/// The error to report for a umad call on (`ca_name`, `port`) that failed with
/// `raw`, given `cas`, the CAs that exist (all of them for an empty name, else the
/// named one if it exists; nullopt when they could not be listed):
/// errc::device_not_found when no CA has that name; errc::no_device when no name
/// was given and there is no CA at all; errc::invalid_port when the CA (for an
/// empty name: every CA) has no port `port`; otherwise `raw` itself, e.g. EIO for
/// a umad device the process may not open.
error_code name_umad_error(const error_code& raw, std::string_view ca_name, int port,
                           const std::optional<std::vector<umad_ca_ports>>& cas) noexcept;

} // namespace rdma_asio::detail

#include "rdma_asio/detail/subnet/umad_port_error.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/error.hpp"

#include <algorithm>

namespace rdma_asio::detail {

error_code name_umad_error(const error_code& raw, std::string_view ca_name, int port,
                           const std::optional<std::vector<umad_ca_ports>>& cas) noexcept {
    if (!raw || !cas)
        return raw;
    auto has_port = [port](const umad_ca_ports& ca) {
        return std::find(ca.ports.begin(), ca.ports.end(), port) != ca.ports.end();
    };
    if (!ca_name.empty()) {
        const auto ca = std::find_if(cas->begin(), cas->end(),
                                     [&](const umad_ca_ports& c) { return c.name == ca_name; });
        if (ca == cas->end())
            return errc::device_not_found;
        // Port 0 asks libibumad to pick a port: no number of its own to be wrong.
        return port != 0 && !has_port(*ca) ? error_code(errc::invalid_port) : raw;
    }
    if (cas->empty())
        return errc::no_device;
    if (port != 0 && std::none_of(cas->begin(), cas->end(), has_port))
        return errc::invalid_port;
    return raw;
}

} // namespace rdma_asio::detail

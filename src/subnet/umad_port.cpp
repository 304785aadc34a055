#include "rdma_asio/detail/subnet/umad_port.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <infiniband/umad.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

namespace rdma_asio::detail {
namespace {

// libibumad returns negative errno values.
error_code from_negative(int r) noexcept {
    return errno_code(r < 0 ? -r : EIO);
}

} // namespace

void umad_port::open(const std::string& ca_name, int port, error_code& ec) noexcept {
    close();
    umad_init(); // a no-op in current libibumad, required by older ones
    const int fd = umad_open_port(ca_name.empty() ? nullptr : ca_name.c_str(), port);
    if (fd < 0) {
        ec = from_negative(fd);
        return;
    }
    long methods[16 / sizeof(long)] = {};
    const unsigned report = sa::method::report;
    methods[report / (sizeof(long) * CHAR_BIT)] |= 1L << (report % (sizeof(long) * CHAR_BIT));
    const int agent = umad_register(fd, sa::mgmt_class, sa::class_version, 0, methods);
    if (agent < 0) {
        ec = from_negative(agent);
        umad_close_port(fd);
        return;
    }
    fd_ = fd;
    agent_ = agent;
    ca_name_ = ca_name;
    port_ = port;
    ec.clear();
}

void umad_port::close() noexcept {
    if (fd_ < 0)
        return;
    umad_unregister(fd_, agent_);
    umad_close_port(fd_);
    fd_ = agent_ = -1;
}

umad_port_info umad_port::query(const std::string& ca_name, int port, error_code& ec) noexcept {
    umad_port_t p{};
    const int r = umad_get_port(ca_name.empty() ? nullptr : ca_name.c_str(), port, &p);
    umad_port_info info;
    if (r < 0) {
        ec = from_negative(r);
        return info;
    }
    info.lid = static_cast<std::uint16_t>(p.base_lid);
    info.sm_lid = static_cast<std::uint16_t>(p.sm_lid);
    info.sm_sl = static_cast<std::uint8_t>(p.sm_sl);
    // "InfiniBand" or "Ethernet" from sysfs; libibumad says "IB" when the file is
    // missing (older kernels, umad2sim).
    info.infiniband = std::strcmp(p.link_layer, "Ethernet") != 0;
    std::memcpy(info.gid.raw, &p.gid_prefix, 8);
    std::memcpy(info.gid.raw + 8, &p.port_guid, 8);
    umad_release_port(&p);
    ec.clear();
    return info;
}

std::optional<std::vector<umad_ca_ports>> umad_port::list_cas(const std::string& ca_name) noexcept
    try {
    std::vector<std::string> names;
    if (!ca_name.empty()) {
        names.push_back(ca_name);
    } else {
        char listed[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN] = {};
        const int n = umad_get_cas_names(listed, UMAD_MAX_DEVICES);
        if (n < 0)
            return std::nullopt;
        for (int i = 0; i < n && i < UMAD_MAX_DEVICES; ++i)
            names.emplace_back(listed[i], strnlen(listed[i], UMAD_CA_NAME_LEN));
    }
    std::vector<umad_ca_ports> cas;
    for (const std::string& name : names) {
        umad_ca_t ca{};
        const int r = umad_get_ca(name.c_str(), &ca);
        // ENOENT: the CA's sysfs directory is missing, so there is no such CA.
        // (Without any CA, umad_get_cas_names lists a made-up default name.)
        if (r == -ENOENT)
            continue;
        if (r < 0)
            return std::nullopt;
        umad_ca_ports entry{name, {}};
        for (int p = 0; p <= ca.numports && p < UMAD_CA_MAX_PORTS; ++p)
            if (ca.ports[p] != nullptr)
                entry.ports.push_back(p);
        umad_release_ca(&ca);
        cas.push_back(std::move(entry));
    }
    return cas;
} catch (const std::bad_alloc&) {
    return std::nullopt;
}

error_code umad_port::send(std::span<const std::uint8_t> mad, std::uint16_t dlid, std::uint8_t sl,
                           int timeout_ms) noexcept {
    try {
        std::vector<std::uint8_t> buffer(umad_size() + mad.size());
        std::memcpy(umad_get_mad(buffer.data()), mad.data(), mad.size());
        umad_set_addr(buffer.data(), dlid, 1, sl, static_cast<int>(sa::qkey));
        const int r =
            umad_send(fd_, agent_, buffer.data(), static_cast<int>(mad.size()), timeout_ms, 0);
        return r < 0 ? from_negative(r) : error_code{};
    } catch (const std::bad_alloc&) {
        return errno_code(ENOMEM);
    }
}

umad_port::recv_result umad_port::recv(received_mad& out, int timeout_ms, error_code& ec) noexcept {
    alignas(8) std::uint8_t buffer[sizeof(ib_user_mad) + sa::mad_size];
    static_assert(sizeof(ib_user_mad) <= 64, "ib_user_mad grew");
    int length = static_cast<int>(sa::mad_size);
    const int r = umad_recv(fd_, buffer, &length, timeout_ms);
    if (r < 0) {
        // EWOULDBLOCK from the kernel's read, the same value returned by
        // umad2sim's, ETIMEDOUT from a poll that timed out.
        if (r == -EAGAIN || r == -EWOULDBLOCK || r == -ETIMEDOUT || r == -EINTR)
            return recv_result::none;
        ec = from_negative(r);
        return recv_result::error;
    }
    if (umad_status(buffer) != 0)
        return recv_result::skip;
    const auto n = static_cast<std::size_t>(length);
    out.length = n < sa::mad_size ? n : sa::mad_size;
    std::memcpy(out.data.data(), umad_get_mad(buffer), out.length);
    ec.clear();
    return recv_result::mad;
}

} // namespace rdma_asio::detail

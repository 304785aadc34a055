// An open umad port with one agent for the SA class: the one place that calls
// libibumad.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/subnet/sa_mad.hpp"
#include "rdma_asio/detail/subnet/umad_port_error.hpp"

#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rdma_asio::detail {

/// One MAD as received, without libibumad's header.
struct received_mad {
    std::array<std::uint8_t, sa::mad_size> data{};
    std::size_t length = 0;
    std::span<const std::uint8_t> bytes() const noexcept { return {data.data(), length}; }
};

/// What umad_get_port says about the port, read anew for every request: the SM
/// may move.
struct umad_port_info {
    std::uint16_t lid = 0;
    std::uint16_t sm_lid = 0;
    std::uint8_t sm_sl = 0;
    bool infiniband = false;
    ibv_gid gid{}; // GID index 0: subnet prefix + port GUID
};

class umad_port {
public:
    enum class recv_result { mad, none, skip, error };

    umad_port() = default;
    umad_port(const umad_port&) = delete;
    umad_port& operator=(const umad_port&) = delete;
    ~umad_port() { close(); }

    /// umad_open_port, then umad_register for SA class version 2 with Reports in
    /// the method mask (so unsolicited Reports reach this agent). Errors name no
    /// call; the caller adds that.
    void open(const std::string& ca_name, int port, error_code& ec) noexcept;
    void close() noexcept;
    bool is_open() const noexcept { return fd_ >= 0; }

    int fd() const noexcept { return fd_; }
    const std::string& ca_name() const noexcept { return ca_name_; }
    int port() const noexcept { return port_; }

    /// umad_get_port of this port.
    umad_port_info query(error_code& ec) const noexcept { return query(ca_name_, port_, ec); }
    /// umad_get_port of any port; an empty name is the first CA.
    static umad_port_info query(const std::string& ca_name, int port, error_code& ec) noexcept;
    /// The CAs that exist and their ports (umad_get_ca): the one called
    /// `ca_name`, or every CA (umad_get_cas_names) for an empty name. nullopt
    /// when libibumad cannot tell. For name_umad_error.
    static std::optional<std::vector<umad_ca_ports>> list_cas(const std::string& ca_name) noexcept;

    /// umad_send to QP 1 of `dlid`. A request waits for its answer in the kernel
    /// for `timeout_ms` (else the kernel drops the answer as unsolicited); a
    /// response is sent with no timeout.
    error_code send(std::span<const std::uint8_t> mad, std::uint16_t dlid, std::uint8_t sl,
                    int timeout_ms) noexcept;

    /// umad_recv, waiting up to timeout_ms (0: not at all). `skip` is a send
    /// that the kernel reports failed (its status set): the requester's own timer
    /// deals with it. `error` sets ec.
    recv_result recv(received_mad& out, int timeout_ms, error_code& ec) noexcept;

private:
    int fd_ = -1;
    int agent_ = -1;
    std::string ca_name_;
    int port_ = 0;
};

} // namespace rdma_asio::detail

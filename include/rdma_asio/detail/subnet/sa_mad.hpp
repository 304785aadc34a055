// Subnet Administration MADs: plain encode/decode functions, no I/O.
//
// Layout (IBA 15.2.1, <infiniband/umad_sa.h>): a 24-byte common MAD header, a
// 12-byte RMPP header, SM_Key (8), AttributeOffset (2), reserved (2),
// ComponentMask (8), then 200 bytes of attribute data from offset 56. Every field
// is big-endian. Decoders check the length and the header before reading a byte
// of the attribute, and never read past the span they are given.
#pragma once

#include <infiniband/verbs.h>

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace rdma_asio::detail::sa {

inline constexpr std::size_t mad_size = 256;
inline constexpr std::size_t header_size = 24;
inline constexpr std::size_t data_offset = 56;
inline constexpr std::size_t inform_info_size = 36;
inline constexpr std::size_t notice_size = 80;

inline constexpr std::uint8_t base_version = 1;
inline constexpr std::uint8_t mgmt_class = 0x03;
inline constexpr std::uint8_t class_version = 2;
/// Q_Key of the SA's QP1.
inline constexpr std::uint32_t qkey = 0x80010000;

namespace method {
inline constexpr std::uint8_t get = 0x01;
inline constexpr std::uint8_t set = 0x02;
inline constexpr std::uint8_t report = 0x06;
inline constexpr std::uint8_t get_resp = 0x81;
inline constexpr std::uint8_t report_resp = 0x86;
} // namespace method

namespace attr {
inline constexpr std::uint16_t notice = 0x0002;
inline constexpr std::uint16_t inform_info = 0x0003;
inline constexpr std::uint16_t inform_info_record = 0x00f3;
} // namespace attr

/// The generic traps ibv_register_sm_events maps onto.
namespace trap {
inline constexpr std::uint16_t gid_in_service = 64;
inline constexpr std::uint16_t gid_out_of_service = 65;
inline constexpr std::uint16_t mcg_created = 66;
inline constexpr std::uint16_t mcg_deleted = 67;
} // namespace trap

using mad_buffer = std::array<std::uint8_t, mad_size>;

/// The common MAD header.
struct mad_header {
    std::uint8_t base_version = sa::base_version;
    std::uint8_t mgmt_class = sa::mgmt_class;
    std::uint8_t class_version = sa::class_version;
    std::uint8_t method = 0;
    std::uint16_t status = 0;
    std::uint16_t class_specific = 0;
    std::uint64_t tid = 0;
    std::uint16_t attr_id = 0;
    std::uint32_t attr_mod = 0;

    friend bool operator==(const mad_header&, const mad_header&) = default;
};

/// InformInfo (IBA 14.2.5.12): a subscription to traps.
struct inform_info {
    ibv_gid gid{};
    std::uint16_t lid_range_begin = 0;
    std::uint16_t lid_range_end = 0;
    bool is_generic = true;
    bool subscribe = true;
    std::uint16_t type = 0;
    std::uint16_t trap_number = 0;
    std::uint32_t qpn = 0;            // 24 bits
    std::uint8_t resp_time_value = 0; // 5 bits
    std::uint32_t producer_type = 0;  // 24 bits
};

/// The subscription rdma_asio uses: generic trap `trap_number` from any source
/// (GID zero and LIDRangeBegin 0xFFFF, the only wildcard the SA honours), any
/// type and producer, reported to QP 1. An unsubscribe must repeat the QPN and
/// RespTimeValue of its subscription.
inform_info wildcard_subscription(std::uint16_t trap_number, bool subscribe,
                                  std::uint8_t resp_time_value) noexcept;

/// Notice (IBA 14.2.5.1), as carried by a SubnAdmReport.
struct notice {
    bool is_generic = true;
    std::uint8_t type = 0;           // 7 bits
    std::uint32_t producer_type = 0; // 24 bits (generic notices)
    std::uint16_t trap_number = 0;
    std::uint16_t issuer_lid = 0;
    std::uint16_t toggle_count = 0;
    std::array<std::uint8_t, 54> data_details{};
    ibv_gid issuer_gid{};

    /// For traps 64-67, the GID the trap is about (port GID or MGID): bytes 6-21
    /// of DataDetails, i.e. Notice bytes 16-31.
    ibv_gid subject_gid() const noexcept;
    void set_subject_gid(const ibv_gid& gid) noexcept;
};

void encode_header(const mad_header& h, std::span<std::uint8_t, header_size> out) noexcept;

/// SubnAdmSet(InformInfo): subscribe or unsubscribe, per info.subscribe.
mad_buffer encode_inform_info_set(std::uint64_t tid, const inform_info& info) noexcept;
/// SubnAdmGetResp(InformInfo) echoing `info` with `status` (the SA's answer).
mad_buffer encode_inform_info_response(std::uint64_t tid, const inform_info& info,
                                       std::uint16_t status) noexcept;
/// SubnAdmReport(Notice), as the SA sends it.
mad_buffer encode_report(std::uint64_t tid, const notice& n) noexcept;
/// SubnAdmReportResp: echoes the TID and the Notice of `report`, which must be a
/// decodable Report (see decode_report).
mad_buffer encode_report_response(std::span<const std::uint8_t> report) noexcept;

/// Reads the common header. errc::malformed_mad when `mad` is shorter than the
/// header or is not an SA MAD of class version 2.
error_code decode_header(std::span<const std::uint8_t> mad, mad_header& out) noexcept;
/// Reads the InformInfo of a MAD whose header names that attribute.
error_code decode_inform_info(std::span<const std::uint8_t> mad, inform_info& out) noexcept;
/// Reads the Notice of a SubnAdmReport.
error_code decode_report(std::span<const std::uint8_t> mad, notice& out) noexcept;

} // namespace rdma_asio::detail::sa

#include "rdma_asio/detail/subnet/sa_mad.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/error.hpp"

#include <algorithm>
#include <cstring>

namespace rdma_asio::detail::sa {
namespace {

void put16(std::uint8_t* p, std::uint16_t v) noexcept {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}
void put24(std::uint8_t* p, std::uint32_t v) noexcept {
    p[0] = static_cast<std::uint8_t>(v >> 16);
    p[1] = static_cast<std::uint8_t>(v >> 8);
    p[2] = static_cast<std::uint8_t>(v);
}
void put32(std::uint8_t* p, std::uint32_t v) noexcept {
    put16(p, static_cast<std::uint16_t>(v >> 16));
    put16(p + 2, static_cast<std::uint16_t>(v));
}
void put64(std::uint8_t* p, std::uint64_t v) noexcept {
    put32(p, static_cast<std::uint32_t>(v >> 32));
    put32(p + 4, static_cast<std::uint32_t>(v));
}
std::uint16_t get16(const std::uint8_t* p) noexcept {
    return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}
std::uint32_t get24(const std::uint8_t* p) noexcept {
    return std::uint32_t{p[0]} << 16 | std::uint32_t{p[1]} << 8 | p[2];
}
std::uint32_t get32(const std::uint8_t* p) noexcept {
    return std::uint32_t{get16(p)} << 16 | get16(p + 2);
}
std::uint64_t get64(const std::uint8_t* p) noexcept {
    return std::uint64_t{get32(p)} << 32 | get32(p + 4);
}

error_code malformed() noexcept {
    return make_error_code(errc::malformed_mad);
}

mad_buffer with_header(std::uint8_t m, std::uint64_t tid, std::uint16_t attr_id,
                       std::uint16_t status = 0) noexcept {
    mad_buffer mad{};
    mad_header h;
    h.method = m;
    h.tid = tid;
    h.attr_id = attr_id;
    h.status = status;
    encode_header(h, std::span<std::uint8_t, header_size>(mad.data(), header_size));
    return mad;
}

void put_inform_info(std::uint8_t* p, const inform_info& info) noexcept {
    std::memcpy(p, info.gid.raw, 16);
    put16(p + 16, info.lid_range_begin);
    put16(p + 18, info.lid_range_end);
    p[22] = info.is_generic ? 1 : 0;
    p[23] = info.subscribe ? 1 : 0;
    put16(p + 24, info.type);
    put16(p + 26, info.trap_number);
    put32(p + 28, (info.qpn & 0xffffff) << 8 | (info.resp_time_value & 0x1f));
    put24(p + 33, info.producer_type);
}

// Header and attribute checks shared by the attribute decoders.
error_code check(std::span<const std::uint8_t> mad, std::uint16_t attr_id, std::size_t attr_size,
                 mad_header& h) noexcept {
    if (auto ec = decode_header(mad, h))
        return ec;
    if (h.attr_id != attr_id || mad.size() < data_offset + attr_size)
        return malformed();
    return {};
}

} // namespace

inform_info wildcard_subscription(std::uint16_t trap_number, bool subscribe,
                                  std::uint8_t resp_time_value) noexcept {
    inform_info info;
    info.lid_range_begin = 0xffff;
    info.is_generic = true;
    info.subscribe = subscribe;
    info.type = 0xffff;
    info.trap_number = trap_number;
    info.qpn = 1;
    info.resp_time_value = resp_time_value;
    info.producer_type = 0xffffff;
    return info;
}

ibv_gid notice::subject_gid() const noexcept {
    ibv_gid gid;
    std::memcpy(gid.raw, data_details.data() + 6, 16);
    return gid;
}

void notice::set_subject_gid(const ibv_gid& gid) noexcept {
    std::memcpy(data_details.data() + 6, gid.raw, 16);
}

void encode_header(const mad_header& h, std::span<std::uint8_t, header_size> out) noexcept {
    std::uint8_t* p = out.data();
    p[0] = h.base_version;
    p[1] = h.mgmt_class;
    p[2] = h.class_version;
    p[3] = h.method;
    put16(p + 4, h.status);
    put16(p + 6, h.class_specific);
    put64(p + 8, h.tid);
    put16(p + 16, h.attr_id);
    put16(p + 18, 0);
    put32(p + 20, h.attr_mod);
}

mad_buffer encode_inform_info_set(std::uint64_t tid, const inform_info& info) noexcept {
    mad_buffer mad = with_header(method::set, tid, attr::inform_info);
    put_inform_info(mad.data() + data_offset, info);
    return mad;
}

mad_buffer encode_inform_info_response(std::uint64_t tid, const inform_info& info,
                                       std::uint16_t status) noexcept {
    mad_buffer mad = with_header(method::get_resp, tid, attr::inform_info, status);
    put_inform_info(mad.data() + data_offset, info);
    return mad;
}

mad_buffer encode_report(std::uint64_t tid, const notice& n) noexcept {
    mad_buffer mad = with_header(method::report, tid, attr::notice);
    std::uint8_t* p = mad.data() + data_offset;
    p[0] = static_cast<std::uint8_t>((n.is_generic ? 0x80 : 0) | (n.type & 0x7f));
    put24(p + 1, n.producer_type);
    put16(p + 4, n.trap_number);
    put16(p + 6, n.issuer_lid);
    put16(p + 8, n.toggle_count);
    std::memcpy(p + 10, n.data_details.data(), n.data_details.size());
    std::memcpy(p + 64, n.issuer_gid.raw, 16);
    return mad;
}

mad_buffer encode_report_response(std::span<const std::uint8_t> report) noexcept {
    mad_buffer mad{};
    std::copy_n(report.begin(), std::min(report.size(), mad.size()), mad.begin());
    mad[3] = method::report_resp;
    put16(mad.data() + 4, 0); // status
    return mad;
}

error_code decode_header(std::span<const std::uint8_t> mad, mad_header& out) noexcept {
    if (mad.size() < header_size)
        return malformed();
    const std::uint8_t* p = mad.data();
    mad_header h;
    h.base_version = p[0];
    h.mgmt_class = p[1];
    h.class_version = p[2];
    h.method = p[3];
    h.status = get16(p + 4);
    h.class_specific = get16(p + 6);
    h.tid = get64(p + 8);
    h.attr_id = get16(p + 16);
    h.attr_mod = get32(p + 20);
    if (h.base_version != base_version || h.mgmt_class != mgmt_class ||
        h.class_version != class_version)
        return malformed();
    out = h;
    return {};
}

error_code decode_inform_info(std::span<const std::uint8_t> mad, inform_info& out) noexcept {
    mad_header h;
    if (auto ec = check(mad, attr::inform_info, inform_info_size, h))
        return ec;
    const std::uint8_t* p = mad.data() + data_offset;
    inform_info info;
    std::memcpy(info.gid.raw, p, 16);
    info.lid_range_begin = get16(p + 16);
    info.lid_range_end = get16(p + 18);
    info.is_generic = p[22] != 0;
    info.subscribe = p[23] != 0;
    info.type = get16(p + 24);
    info.trap_number = get16(p + 26);
    const std::uint32_t word = get32(p + 28);
    info.qpn = word >> 8;
    info.resp_time_value = static_cast<std::uint8_t>(word & 0x1f);
    info.producer_type = get24(p + 33);
    out = info;
    return {};
}

error_code decode_report(std::span<const std::uint8_t> mad, notice& out) noexcept {
    mad_header h;
    if (auto ec = check(mad, attr::notice, notice_size, h))
        return ec;
    if (h.method != method::report)
        return malformed();
    const std::uint8_t* p = mad.data() + data_offset;
    notice n;
    n.is_generic = (p[0] & 0x80) != 0;
    n.type = p[0] & 0x7f;
    n.producer_type = get24(p + 1);
    n.trap_number = get16(p + 4);
    n.issuer_lid = get16(p + 6);
    n.toggle_count = get16(p + 8);
    std::memcpy(n.data_details.data(), p + 10, n.data_details.size());
    std::memcpy(n.issuer_gid.raw, p + 64, 16);
    out = n;
    return {};
}

} // namespace rdma_asio::detail::sa

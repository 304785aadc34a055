// The SA MAD codec on arbitrary bytes: decoders never read past their span and
// either refuse or give fields that encode back to the same bytes; and encoding
// arbitrary field values decodes to the same values (within the field widths).
#include "fuzz_check.hpp"

#include "rdma_asio/detail/subnet/sa_mad.hpp"

#include <array>
#include <memory>

namespace sa = rdma_asio::detail::sa;
using rdma_asio::fuzz::script_reader;

namespace {

bool same_gid(const ibv_gid& a, const ibv_gid& b) {
    return std::memcmp(a.raw, b.raw, sizeof a.raw) == 0;
}

bool same(const sa::inform_info& a, const sa::inform_info& b) {
    return same_gid(a.gid, b.gid) && a.lid_range_begin == b.lid_range_begin &&
           a.lid_range_end == b.lid_range_end && a.is_generic == b.is_generic &&
           a.subscribe == b.subscribe && a.type == b.type && a.trap_number == b.trap_number &&
           a.qpn == b.qpn && a.resp_time_value == b.resp_time_value &&
           a.producer_type == b.producer_type;
}

bool same(const sa::notice& a, const sa::notice& b) {
    return a.is_generic == b.is_generic && a.type == b.type && a.producer_type == b.producer_type &&
           a.trap_number == b.trap_number && a.issuer_lid == b.issuer_lid &&
           a.toggle_count == b.toggle_count && a.data_details == b.data_details &&
           same_gid(a.issuer_gid, b.issuer_gid);
}

// Decoding what arrived: the bytes are copied to a heap block of exactly their
// size, so that AddressSanitizer sees any read past the end.
void decode_arbitrary(const std::uint8_t* data, std::size_t size) {
    const auto copy = std::make_unique<std::uint8_t[]>(size);
    if (size > 0)
        std::memcpy(copy.get(), data, size);
    const std::span<const std::uint8_t> mad(copy.get(), size);

    sa::mad_header h;
    const bool header_ok = !sa::decode_header(mad, h);
    FUZZ_CHECK(header_ok == (size >= sa::header_size && mad[0] == sa::base_version &&
                             mad[1] == sa::mgmt_class && mad[2] == sa::class_version));
    if (!header_ok)
        return;
    // The header encodes back to the same bytes, but for the reserved field.
    std::array<std::uint8_t, sa::header_size> again{};
    sa::encode_header(h, again);
    for (std::size_t i = 0; i < sa::header_size; ++i)
        FUZZ_CHECK(i == 18 || i == 19 || again[i] == mad[i]);

    sa::inform_info info;
    if (!sa::decode_inform_info(mad, info)) {
        FUZZ_CHECK(h.attr_id == sa::attr::inform_info);
        FUZZ_CHECK(size >= sa::data_offset + sa::inform_info_size);
        sa::inform_info back;
        FUZZ_CHECK(!sa::decode_inform_info(sa::encode_inform_info_set(h.tid, info), back));
        FUZZ_CHECK(same(info, back));
        FUZZ_CHECK(
            !sa::decode_inform_info(sa::encode_inform_info_response(h.tid, info, h.status), back));
        FUZZ_CHECK(same(info, back));
    } else {
        FUZZ_CHECK(h.attr_id != sa::attr::inform_info ||
                   size < sa::data_offset + sa::inform_info_size);
    }

    sa::notice n;
    if (!sa::decode_report(mad, n)) {
        FUZZ_CHECK(h.method == sa::method::report && h.attr_id == sa::attr::notice);
        FUZZ_CHECK(size >= sa::data_offset + sa::notice_size);
        sa::notice back;
        const sa::mad_buffer report = sa::encode_report(h.tid, n);
        FUZZ_CHECK(!sa::decode_report(report, back));
        FUZZ_CHECK(same(n, back));
        // The ReportResp echoes the Report but for the method and the status.
        const sa::mad_buffer resp = sa::encode_report_response(mad);
        sa::mad_header rh;
        FUZZ_CHECK(!sa::decode_header(resp, rh));
        FUZZ_CHECK(rh.method == sa::method::report_resp && rh.status == 0 && rh.tid == h.tid &&
                   rh.attr_id == h.attr_id);
        for (std::size_t i = 6; i < std::min(size, sa::mad_size); ++i)
            FUZZ_CHECK(resp[i] == mad[i]);
    }
}

// Encoding arbitrary values: every field the SA reads comes back, masked to its width.
void round_trip_fields(script_reader& in) {
    const std::uint64_t tid = in.u64();
    sa::inform_info info;
    for (auto& b : info.gid.raw)
        b = in.u8();
    info.lid_range_begin = in.u16();
    info.lid_range_end = in.u16();
    const std::uint8_t flags = in.u8();
    info.is_generic = (flags & 1) != 0;
    info.subscribe = (flags & 2) != 0;
    info.type = in.u16();
    info.trap_number = in.u16();
    info.qpn = in.u32();
    info.resp_time_value = in.u8();
    info.producer_type = in.u32();
    const std::uint16_t status = in.u16();

    sa::inform_info back;
    sa::mad_header h;
    const sa::mad_buffer set = sa::encode_inform_info_set(tid, info);
    FUZZ_CHECK(!sa::decode_header(set, h));
    FUZZ_CHECK(h.method == sa::method::set && h.tid == tid && h.status == 0 &&
               h.attr_id == sa::attr::inform_info);
    FUZZ_CHECK(!sa::decode_inform_info(set, back));
    info.qpn &= 0xffffff;
    info.resp_time_value &= 0x1f;
    info.producer_type &= 0xffffff;
    FUZZ_CHECK(same(info, back));
    const sa::mad_buffer resp = sa::encode_inform_info_response(tid, info, status);
    FUZZ_CHECK(!sa::decode_header(resp, h));
    FUZZ_CHECK(h.method == sa::method::get_resp && h.tid == tid && h.status == status);
    FUZZ_CHECK(!sa::decode_inform_info(resp, back));
    FUZZ_CHECK(same(info, back));
    sa::notice not_one;
    FUZZ_CHECK(sa::decode_report(resp, not_one)); // not a Report

    sa::notice n;
    const std::uint8_t first = in.u8();
    n.is_generic = (first & 0x80) != 0;
    n.type = first & 0x7f;
    n.producer_type = in.u32() & 0xffffff;
    n.trap_number = in.u16();
    n.issuer_lid = in.u16();
    n.toggle_count = in.u16();
    for (auto& b : n.data_details)
        b = in.u8();
    for (auto& b : n.issuer_gid.raw)
        b = in.u8();
    const sa::mad_buffer report = sa::encode_report(tid, n);
    sa::notice nback;
    FUZZ_CHECK(!sa::decode_report(report, nback));
    FUZZ_CHECK(same(n, nback));
    ibv_gid subject;
    std::memcpy(subject.raw, n.data_details.data() + 6, 16);
    FUZZ_CHECK(same_gid(nback.subject_gid(), subject));
    // A ReportResp is no Report.
    FUZZ_CHECK(sa::decode_report(sa::encode_report_response(report), nback));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    decode_arbitrary(data, size);
    script_reader in({data, size});
    round_trip_fields(in);
    return 0;
}

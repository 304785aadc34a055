#include "rdma_asio/detail/subnet/sa_mad.hpp"

#include <catch2/catch.hpp>

#include "rdma_asio/error.hpp"

#include <cstdint>
#include <vector>

namespace sa_mad_test {

namespace sa = rdma_asio::detail::sa;
using rdma_asio::errc;

namespace {

// Writes `bytes` at `offset` of a zeroed 256-byte MAD: expectations are spelled
// out byte by byte from the IBA layout, not computed by the code under test.
sa::mad_buffer
expected(std::initializer_list<std::pair<std::size_t, std::vector<std::uint8_t>>> parts) {
    sa::mad_buffer mad{};
    for (const auto& [offset, bytes] : parts)
        for (std::size_t i = 0; i < bytes.size(); ++i)
            mad[offset + i] = bytes[i];
    return mad;
}

ibv_gid gid_of(std::initializer_list<std::uint8_t> bytes) {
    ibv_gid gid{};
    std::size_t i = 0;
    for (auto b : bytes)
        gid.raw[i++] = b;
    return gid;
}

const std::vector<std::uint8_t> common = {0x01, 0x03, 0x02};

} // namespace

TEST_CASE("a wildcard subscription to trap 64 is encoded byte for byte", "[sa_mad]") {
    const auto mad = sa::encode_inform_info_set(
        0x0000000012345678, sa::wildcard_subscription(sa::trap::gid_in_service, true, 18));
    const auto want = expected({
        {0, {0x01, 0x03, 0x02, 0x02}},                               // SA, v2, SubnAdmSet
        {8, {0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78}},                   // TID
        {16, {0x00, 0x03}},                                          // InformInfo
        {56 + 16, {0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01}}, // LIDs, IsGeneric, Subscribe
        {56 + 24, {0xff, 0xff, 0x00, 0x40}},                         // Type, TrapNumber 64
        {56 + 28, {0x00, 0x00, 0x01, 0x12}},                         // QPN 1, RespTimeValue 18
        {56 + 33, {0xff, 0xff, 0xff}},                               // ProducerType
    });
    CHECK(mad == want);
}

TEST_CASE("an unsubscription repeats QPN 1 and the RespTimeValue", "[sa_mad]") {
    const auto mad =
        sa::encode_inform_info_set(7, sa::wildcard_subscription(sa::trap::mcg_deleted, false, 18));
    const auto want = expected({
        {0, {0x01, 0x03, 0x02, 0x02}},
        {8, {0, 0, 0, 0, 0, 0, 0, 7}},
        {16, {0x00, 0x03}},
        {56 + 16, {0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00}}, // Subscribe = 0
        {56 + 24, {0xff, 0xff, 0x00, 0x43}},
        {56 + 28, {0x00, 0x00, 0x01, 0x12}},
        {56 + 33, {0xff, 0xff, 0xff}},
    });
    CHECK(mad == want);
}

TEST_CASE("a Report of trap 66 and its ReportResp", "[sa_mad]") {
    sa::notice n;
    n.is_generic = true;
    n.type = 4;          // informational
    n.producer_type = 4; // class manager
    n.trap_number = sa::trap::mcg_created;
    n.issuer_lid = 0x0001;
    n.toggle_count = 0x8003;
    n.set_subject_gid(gid_of({0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
    n.issuer_gid = gid_of({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xc9, 0, 0, 0, 0, 0x01});
    const auto report = sa::encode_report(0xabcdef0100000042, n);
    const auto want = expected({
        {0, {0x01, 0x03, 0x02, 0x06}}, // SubnAdmReport
        {8, {0xab, 0xcd, 0xef, 0x01, 0x00, 0x00, 0x00, 0x42}},
        {16, {0x00, 0x02}}, // Notice
        {56, {0x84, 0x00, 0x00, 0x04, 0x00, 0x42, 0x00, 0x01, 0x80, 0x03}},
        {56 + 16, {0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
        {56 + 64, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xc9, 0, 0, 0, 0, 0x01}},
    });
    CHECK(report == want);

    auto response = sa::encode_report_response(report);
    auto want_response = want;
    want_response[3] = 0x86; // SubnAdmReportResp, same TID, same Notice
    CHECK(response == want_response);

    sa::notice decoded;
    REQUIRE_FALSE(sa::decode_report(report, decoded));
    CHECK(decoded.is_generic);
    CHECK(decoded.type == 4);
    CHECK(decoded.producer_type == 4);
    CHECK(decoded.trap_number == 66);
    CHECK(decoded.issuer_lid == 1);
    CHECK(decoded.toggle_count == 0x8003);
    CHECK(decoded.subject_gid().raw[0] == 0xff);
    CHECK(decoded.subject_gid().raw[15] == 0x01);
    CHECK(decoded.issuer_gid.raw[9] == 0x02);
}

TEST_CASE("notices for traps 64 to 67 carry their GID at MAD offset 72", "[sa_mad]") {
    for (std::uint16_t trap = 64; trap <= 67; ++trap) {
        sa::notice n;
        n.trap_number = trap;
        n.set_subject_gid(gid_of(
            {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<std::uint8_t>(trap)}));
        const auto mad = sa::encode_report(trap, n);
        CAPTURE(trap);
        CHECK(mad[72] == 0xfe);
        CHECK(mad[87] == trap);
        CHECK(mad[60] == 0x00);
        CHECK(mad[61] == trap);
        sa::notice back;
        REQUIRE_FALSE(sa::decode_report(mad, back));
        CHECK(back.trap_number == trap);
        CHECK(back.subject_gid().raw[15] == trap);
    }
}

TEST_CASE("the SA's answer to a subscription decodes with its status", "[sa_mad]") {
    auto info = sa::wildcard_subscription(sa::trap::gid_out_of_service, true, 18);
    const auto mad = sa::encode_inform_info_response(0x1122334455667788, info, 0x0200);
    CHECK(mad[3] == 0x81);
    CHECK(mad[4] == 0x02);
    CHECK(mad[5] == 0x00);
    sa::mad_header h;
    REQUIRE_FALSE(sa::decode_header(mad, h));
    CHECK(h.method == sa::method::get_resp);
    CHECK(h.status == 0x0200);
    CHECK(h.tid == 0x1122334455667788);
    CHECK(h.attr_id == sa::attr::inform_info);
    sa::inform_info back;
    REQUIRE_FALSE(sa::decode_inform_info(mad, back));
    CHECK(back.trap_number == 65);
    CHECK(back.qpn == 1);
    CHECK(back.resp_time_value == 18);
    CHECK(back.subscribe);
    CHECK(back.lid_range_begin == 0xffff);
    CHECK(back.producer_type == 0xffffff);
    CHECK(back.type == 0xffff);
}

TEST_CASE("short or foreign MADs are refused without reading past them", "[sa_mad]") {
    sa::notice n;
    n.trap_number = 64;
    const auto report = sa::encode_report(1, n);
    sa::mad_header h;
    sa::notice out;
    sa::inform_info info;

    // Every length short of the Notice's end: an error, never a read past the span
    // (ASan guards the copies made here).
    for (std::size_t len = 0; len < sa::data_offset + sa::notice_size; ++len) {
        std::vector<std::uint8_t> cut(report.begin(), report.begin() + len);
        CAPTURE(len);
        CHECK(sa::decode_report(cut, out) == errc::malformed_mad);
    }
    CHECK(sa::decode_header(std::span<const std::uint8_t>(report.data(), 23), h) ==
          errc::malformed_mad);
    CHECK_FALSE(sa::decode_header(std::span<const std::uint8_t>(report.data(), 24), h));

    auto other_class = report;
    other_class[1] = 0x81; // directed-route SMP
    CHECK(sa::decode_header(other_class, h) == errc::malformed_mad);
    auto other_version = report;
    other_version[2] = 1;
    CHECK(sa::decode_report(other_version, out) == errc::malformed_mad);
    auto other_base = report;
    other_base[0] = 2;
    CHECK(sa::decode_report(other_base, out) == errc::malformed_mad);

    // A Report is not an InformInfo, and an InformInfo answer is not a Report.
    CHECK(sa::decode_inform_info(report, info) == errc::malformed_mad);
    const auto answer = sa::encode_inform_info_response(1, info, 0);
    CHECK(sa::decode_report(answer, out) == errc::malformed_mad);
}

} // namespace sa_mad_test

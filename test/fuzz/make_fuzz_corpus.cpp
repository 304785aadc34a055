// Writes the seed inputs of the fuzz targets from real encodings:
//   make_fuzz_corpus DIR   ->  DIR/sa_mad/*, DIR/sa_subscriber/*, DIR/devx_event/*
// The seeds in the repository (test/fuzz/corpus) were made with it; inputs the
// fuzzers found worth keeping sit next to them.
#include "fuzz_check.hpp"
#include "sa_subscriber_script.hpp"

#include "rdma_asio/detail/subnet/sa_mad.hpp"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace sa = rdma_asio::detail::sa;
namespace script = rdma_asio::fuzz::subscriber_script;
using rdma_asio::fuzz::script_writer;

namespace {

std::filesystem::path root;

void write(const std::string& target, const std::string& name,
           std::span<const std::uint8_t> bytes) {
    const auto dir = root / target;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
}

sa::notice notice_about(std::uint16_t trap, std::uint8_t last_gid_byte, bool multicast) {
    sa::notice n;
    n.type = 4;
    n.producer_type = 4;
    n.trap_number = trap;
    ibv_gid g{};
    g.raw[0] = multicast ? 0xff : 0xfe;
    g.raw[15] = last_gid_byte;
    n.set_subject_gid(g);
    return n;
}

void sa_mad_seeds() {
    write("sa_mad", "set_subscribe_64",
          sa::encode_inform_info_set(0x64, sa::wildcard_subscription(64, true, 18)));
    write("sa_mad", "set_unsubscribe_66",
          sa::encode_inform_info_set(0x2a00000066, sa::wildcard_subscription(66, false, 18)));
    write("sa_mad", "getresp_refused_67",
          sa::encode_inform_info_response(0x67, sa::wildcard_subscription(67, true, 18), 0x0200));
    const auto report = sa::encode_report(7, notice_about(66, 1, true));
    write("sa_mad", "report_mcg_created", report);
    write("sa_mad", "report_resp", sa::encode_report_response(report));
    write("sa_mad", "report_cut_short", std::span(report).first(100));
}

// The script's header: retries, first TID.
script_writer script_start(std::uint8_t retries, std::uint32_t first_tid) {
    script_writer w;
    w.u8(retries);
    w.u32(first_tid);
    return w;
}
void op(script_writer& w, script::op o) {
    w.u8(o);
}
void reg(script_writer& w, script::op o, std::uint8_t mask_selector,
         std::initializer_list<std::uint8_t> pool_gids = {}) {
    op(w, o);
    w.u8(mask_selector);
    w.u8(static_cast<std::uint8_t>(pool_gids.size()));
    for (auto g : pool_gids)
        w.u8(g);
}
void answer(script_writer& w, std::uint8_t index, std::uint16_t status = 0) {
    op(w, script::answer);
    w.u8(index);
    w.u16(status);
    w.u32(0x2a);
}
void report(script_writer& w, std::uint8_t trap, std::uint8_t pool_gid, std::uint16_t tid) {
    op(w, script::report);
    w.u8(trap);
    w.u8(0);
    w.u8(pool_gid);
    w.u16(tid);
}
void advance(script_writer& w, std::uint16_t ms) {
    op(w, script::advance_time);
    w.u16(ms);
}

void sa_subscriber_seeds() {
    { // register, confirm, Reports (one a duplicate, one for another GID), unregister
        auto w = script_start(3, 100);
        reg(w, script::start_register, 0, {0}); // ugid, port GID 0
        answer(w, 0);
        answer(w, 0);
        report(w, 0, 0, 1);
        report(w, 1, 1, 2);
        report(w, 0, 0, 1);
        reg(w, script::start_unregister, 0, {0});
        answer(w, 0);
        answer(w, 0);
        write("sa_subscriber", "register_report_unregister", w.data());
    }
    { // an unsubscribe times out; registering again must subscribe again
        auto w = script_start(1, 0xfffffffe);
        reg(w, script::start_register, 3); // mgid_all
        answer(w, 0);
        answer(w, 0);
        reg(w, script::start_unregister, 3);
        for (int i = 0; i < 3; ++i)
            advance(w, 100);
        reg(w, script::start_register, 3);
        answer(w, 1);
        answer(w, 0);
        op(w, script::abandon);
        write("sa_subscriber", "unsubscribe_timeout", w.data());
    }
    { // an SM change, refused resubscriptions, queued operations, shutdown
        auto w = script_start(2, 7);
        reg(w, script::start_register, 4); // all
        reg(w, script::start_register, 1, {2, 3});
        op(w, script::resubscribe);
        for (int i = 0; i < 4; ++i)
            answer(w, 0);
        for (int i = 0; i < 4; ++i)
            answer(w, 0, 0x0200);
        op(w, script::start_unregister_all);
        op(w, script::reject);
        advance(w, 250);
        op(w, script::abandon);
        write("sa_subscriber", "resubscribe_refused", w.data());
    }
    { // invalid arguments, garbage and a real Report as raw bytes
        auto w = script_start(0, 1);
        reg(w, script::start_register, 200);
        reg(w, script::start_register, 0, {2});
        const auto r = sa::encode_report(9, notice_about(65, 1, false));
        op(w, script::raw_mad);
        w.u16(static_cast<std::uint16_t>(r.size()));
        w.bytes(r);
        op(w, script::raw_mad);
        w.u16(30);
        w.bytes(std::span(r).first(30));
        write("sa_subscriber", "invalid_and_raw", w.data());
    }
}

void devx_read(script_writer& w, std::uint64_t cookie, std::size_t eqe_bytes) {
    w.u8(1); // a successful read
    w.u16(static_cast<std::uint16_t>(8 + eqe_bytes));
    for (int i = 0; i < 8; ++i) // the cookie, in host order as the kernel writes it
        w.u8(static_cast<std::uint8_t>(cookie >> (8 * i)));
    for (std::size_t i = 0; i < eqe_bytes; ++i)
        w.u8(static_cast<std::uint8_t>(cookie + i));
}
void devx_error(script_writer& w, std::uint8_t errno_index) {
    w.u8(0); // a failed read
    w.u8(errno_index);
}

void devx_event_seeds() {
    { // with-data events (cookie + 64-byte EQE), a signal, a loss, then empty
        script_writer w;
        w.u8(8); // the sink takes 8
        w.u8(5); // 5 reads
        devx_read(w, 0x1111, 64);
        devx_error(w, 1); // EINTR
        devx_read(w, 0x2222, 64);
        devx_error(w, 2); // EOVERFLOW
        devx_error(w, 0); // EAGAIN
        for (std::uint16_t capacity : {64, 10, 0})
            w.u16(capacity);
        write("devx_event", "with_data", w.data());
    }
    { // omit-data events (the cookie only), then the channel is destroyed
        script_writer w;
        w.u8(2);
        w.u8(4);
        devx_read(w, 1, 0);
        devx_read(w, 2, 0);
        devx_read(w, 3, 0);
        devx_error(w, 3); // EIO
        w.u16(0);
        w.u16(0);
        write("devx_event", "omit_data", w.data());
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: make_fuzz_corpus DIR\n";
        return 2;
    }
    root = argv[1];
    sa_mad_seeds();
    sa_subscriber_seeds();
    devx_event_seeds();
    return 0;
}

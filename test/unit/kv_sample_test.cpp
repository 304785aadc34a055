// The key-value sample's slot format and store description (samples/kv/kv.hpp),
// without a device: what its readers rely on to tell a torn read from an entry.
#include "kv/kv.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kv_sample_test {

TEST_CASE("kv sample: the store description survives the private data", "[kv_sample]") {
    const kv::store_info info{0x7f00'1234'5678'9ab8, 0xdeadbeef, 1024, 256};
    const kv::store_data data = kv::encode(info);
    // rdma_cm pads private data with zeros: a longer buffer still decodes.
    std::vector<std::uint8_t> padded(data.begin(), data.end());
    padded.resize(56, 0);
    for (const auto& bytes : {std::vector<std::uint8_t>(data.begin(), data.end()), padded}) {
        const auto back = kv::decode(bytes.data(), bytes.size());
        REQUIRE(back);
        CHECK(back->address == info.address);
        CHECK(back->rkey == info.rkey);
        CHECK(back->slots == info.slots);
        CHECK(back->slot_size == info.slot_size);
    }
    CHECK_FALSE(kv::decode(nullptr, 0));
    CHECK_FALSE(kv::decode(data.data(), data.size() - 1));
    std::vector<std::uint8_t> zeros(56, 0); // a peer that sent no data
    CHECK_FALSE(kv::decode(zeros.data(), zeros.size()));
    // Slots whose locks would not be 8-byte aligned, as atomics need.
    for (const kv::store_info misaligned : {kv::store_info{info.address + 4, 1, 1024, 256},
                                            kv::store_info{info.address, 1, 1024, 252}}) {
        const kv::store_data d = kv::encode(misaligned);
        CHECK_FALSE(kv::decode(d.data(), d.size()));
    }
}

TEST_CASE("kv sample: an entry reads back, an empty slot is empty, and a torn one is torn",
          "[kv_sample]") {
    std::vector<std::uint8_t> slot(128, 0);
    CHECK(kv::read_entry(slot).what == kv::entry::state::empty);

    kv::write_entry(slot, "colour", "blue");
    kv::entry e = kv::read_entry(slot);
    REQUIRE(e.what == kv::entry::state::holds);
    CHECK(e.key == "colour");
    CHECK(e.value == "blue");

    // A reader that catches one write half landed over another: any byte of the
    // new entry with the rest of the old one is seen as torn, never as an entry.
    std::vector<std::uint8_t> old_slot(128, 0), new_slot(128, 0);
    kv::write_entry(old_slot, "colour", "blue");
    kv::write_entry(new_slot, "colour", "green");
    for (std::size_t cut = 1; cut < old_slot.size(); ++cut) {
        std::vector<std::uint8_t> mixed(new_slot.begin(), new_slot.begin() + cut);
        mixed.insert(mixed.end(), old_slot.begin() + cut, old_slot.end());
        if (mixed == new_slot || mixed == old_slot)
            continue;
        INFO("first " << cut << " bytes of the new entry");
        CHECK(kv::read_entry(mixed).what == kv::entry::state::torn);
    }
    // Lengths that do not fit the slot are torn as well, not read out of bounds.
    std::vector<std::uint8_t> bad(128, 0);
    bad[kv::lock_size + 3] = 200; // key length 200
    CHECK(kv::read_entry(bad).what == kv::entry::state::torn);
}

TEST_CASE("kv sample: a slot whose lock is taken reads as locked, and an entry leaves the lock "
          "alone",
          "[kv_sample]") {
    std::vector<std::uint8_t> slot(128, 0);
    const std::uint64_t token = 0x1234567800000001u;
    std::memcpy(slot.data(), &token, sizeof token);
    CHECK(kv::read_entry(slot).what == kv::entry::state::locked);
    kv::write_entry(slot, "colour", "blue");
    std::uint64_t lock = 0;
    std::memcpy(&lock, slot.data(), sizeof lock);
    CHECK(lock == token); // the put gives it back with its own compare-and-swap
    CHECK(kv::read_entry(slot).what == kv::entry::state::locked);
    std::memset(slot.data(), 0, kv::lock_size);
    kv::entry e = kv::read_entry(slot);
    REQUIRE(e.what == kv::entry::state::holds);
    CHECK(e.value == "blue");
}

TEST_CASE("kv sample: keys spread over the slots, each always to the same one", "[kv_sample]") {
    CHECK(kv::slot_of("colour", 64) == kv::slot_of("colour", 64));
    std::vector<int> used(64, 0);
    for (int i = 0; i < 640; ++i)
        ++used[kv::slot_of("key" + std::to_string(i), 64)];
    CHECK(std::count(used.begin(), used.end(), 0) < 8);
    CHECK(kv::max_value(128) == 40); // 128 - lock 8 - header 16 - key 64
}

} // namespace kv_sample_test

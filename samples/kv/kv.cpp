#include "kv.hpp"

#include "common/big_endian.hpp"

#include <algorithm>
#include <cstring>

namespace kv {
namespace {

using sample::get_be;
using sample::put_be;

// FNV-1a, 64 bits: cheap, and any torn mix of two entries changes it.
std::uint64_t fnv1a(std::span<const std::uint8_t> bytes, std::uint64_t h = 0xcbf29ce484222325) {
    for (std::uint8_t b : bytes)
        h = (h ^ b) * 0x100000001b3;
    return h;
}

std::span<const std::uint8_t> bytes_of(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// The checksum covers the lengths, so that a torn header is caught as well.
std::uint64_t checksum(std::span<const std::uint8_t> lengths, std::string_view key,
                       std::string_view value) {
    return fnv1a(bytes_of(value), fnv1a(bytes_of(key), fnv1a(lengths)));
}

constexpr std::array<std::uint8_t, 4> marker{'K', 'V', 'S', '1'};

} // namespace

store_data encode(const store_info& info) {
    store_data d{};
    std::copy(marker.begin(), marker.end(), d.begin());
    put_be(&d[4], info.address, 8);
    put_be(&d[12], info.rkey, 4);
    put_be(&d[16], info.slots, 4);
    put_be(&d[20], info.slot_size, 4);
    return d;
}

std::optional<store_info> decode(const void* data, std::size_t length) {
    // rdma_cm pads private data with zeros: longer is fine, shorter is not ours.
    const auto* p = static_cast<const std::uint8_t*>(data);
    if (p == nullptr || length < store_data{}.size() ||
        !std::equal(marker.begin(), marker.end(), p))
        return std::nullopt;
    store_info info;
    info.address = get_be(p + 4, 8);
    info.rkey = static_cast<std::uint32_t>(get_be(p + 12, 4));
    info.slots = static_cast<std::uint32_t>(get_be(p + 16, 4));
    info.slot_size = static_cast<std::uint32_t>(get_be(p + 20, 4));
    if (info.slots == 0 || info.slot_size < min_slot_size || info.slot_size % lock_size != 0 ||
        info.address % lock_size != 0)
        return std::nullopt;
    return info;
}

std::size_t max_value(std::uint32_t slot_size) {
    return slot_size - lock_size - header_size - max_key;
}

std::uint32_t slot_of(std::string_view key, std::uint32_t slots) {
    return static_cast<std::uint32_t>(fnv1a(bytes_of(key)) % slots);
}

void write_entry(std::span<std::uint8_t> whole, std::string_view key, std::string_view value) {
    std::span<std::uint8_t> slot = whole.subspan(lock_size);
    std::fill(slot.begin(), slot.end(), std::uint8_t{0});
    put_be(&slot[0], key.size(), 4);
    put_be(&slot[4], value.size(), 4);
    put_be(&slot[8], checksum(slot.first(8), key, value), 8);
    std::memcpy(&slot[header_size], key.data(), key.size());
    std::memcpy(&slot[header_size + key.size()], value.data(), value.size());
}

entry read_entry(std::span<const std::uint8_t> whole) {
    entry e;
    std::uint64_t lock = 0;
    std::memcpy(&lock, whole.data(), lock_size);
    if (lock != 0) {
        e.what = entry::state::locked;
        return e;
    }
    std::span<const std::uint8_t> slot = whole.subspan(lock_size);
    const std::uint64_t key_size = get_be(&slot[0], 4);
    const std::uint64_t value_size = get_be(&slot[4], 4);
    const std::uint64_t sum = get_be(&slot[8], 8);
    if (key_size == 0 && value_size == 0 && sum == 0)
        return e; // empty
    e.what = entry::state::torn;
    if (key_size == 0 || key_size > max_key || header_size + key_size + value_size > slot.size())
        return e;
    const auto* body = reinterpret_cast<const char*>(&slot[header_size]);
    const std::string_view key(body, key_size);
    const std::string_view value(body + key_size, value_size);
    if (checksum(slot.first(8), key, value) != sum)
        return e;
    e.what = entry::state::holds;
    e.key = key;
    e.value = value;
    return e;
}

} // namespace kv

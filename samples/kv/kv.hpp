// What kv_server and kv_client share: where the store is and how it is laid out
// (sent by the server in the private data of its rdma_cm accept), and the format
// of one slot. Only clients touch slots, with RDMA reads and writes; the server's
// CPU never sees a request.
#pragma once

#include <rdma/rdma_cma.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kv {

/// The store as a client addresses it: `slots` slots of `slot_size` bytes from
/// `address` in the server's memory, reachable with `rkey`.
struct store_info {
    std::uint64_t address = 0;
    std::uint32_t rkey = 0;
    std::uint32_t slots = 0;
    std::uint32_t slot_size = 0;
};

/// store_info as the accept's private data: "KVS1", then the fields big-endian.
using store_data = std::array<std::uint8_t, 24>;
store_data encode(const store_info& info);
/// The store_info in private data, or nothing when the data is not store_data.
std::optional<store_info> decode(const void* data, std::size_t length);

/// A slot starts with its lock: 8 bytes that only RDMA atomics change, 0 when
/// free, else the token of the client writing the slot (a put takes it with
/// compare-and-swap, writes, and gives it back the same way). Then one entry: a
/// header (key length, value length, checksum, each big-endian: 4, 4 and 8
/// bytes), the key, the value. All zeros is an empty, free slot. A key lives in
/// the slot its hash names (no probing: a second key with the same slot is
/// refused). Slots are a multiple of 8 bytes, so that every lock is 8-byte
/// aligned, as an atomic needs.
constexpr std::size_t lock_size = 8;
constexpr std::size_t header_size = 16;
constexpr std::size_t max_key = 64;
constexpr std::uint32_t min_slot_size = lock_size + header_size + max_key + 8;
/// The longest value a slot of `slot_size` bytes holds.
std::size_t max_value(std::uint32_t slot_size);
/// The slot of `key` in a store of `slots` slots.
std::uint32_t slot_of(std::string_view key, std::uint32_t slots);

/// Writes the entry (key, value) into `slot` (one whole slot) after its lock,
/// which it leaves alone; the caller has checked the lengths against max_key and
/// max_value.
void write_entry(std::span<std::uint8_t> slot, std::string_view key, std::string_view value);

/// What a slot read with one RDMA read holds. `locked`: a client is writing it;
/// read it again later. `torn`: its lock was free but its checksum does not
/// match: a write landed while it was read, which the lock rules out among
/// clients that take it (one-sided reads and writes are not atomic with each
/// other).
struct entry {
    enum class state { empty, locked, torn, holds } what = state::empty;
    std::string key;
    std::string value;
};
entry read_entry(std::span<const std::uint8_t> slot);

} // namespace kv

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

/// A slot holds one entry: a header (key length, value length, checksum, each
/// big-endian: 4, 4 and 8 bytes), then the key, then the value. All zeros is an
/// empty slot. A key lives in the slot its hash names (no probing: a second key
/// with the same slot is refused).
constexpr std::size_t header_size = 16;
constexpr std::size_t max_key = 64;
constexpr std::uint32_t min_slot_size = header_size + max_key + 1;
/// The longest value a slot of `slot_size` bytes holds.
std::size_t max_value(std::uint32_t slot_size);
/// The slot of `key` in a store of `slots` slots.
std::uint32_t slot_of(std::string_view key, std::uint32_t slots);

/// Writes the entry (key, value) into `slot` (one whole slot); the caller has
/// checked the lengths against max_key and max_value.
void write_entry(std::span<std::uint8_t> slot, std::string_view key, std::string_view value);

/// What a slot read with one RDMA read holds. `torn`: its checksum does not match,
/// because a client's write was landing while it was read (one-sided reads and
/// writes of different clients are not atomic with each other): read it again.
struct entry {
    enum class state { empty, torn, holds } what = state::empty;
    std::string key;
    std::string value;
};
entry read_entry(std::span<const std::uint8_t> slot);

/// rdma_conn_param for an RC connection with one RDMA read in flight each way.
rdma_conn_param conn_param();

} // namespace kv

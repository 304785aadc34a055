// The script the sa_subscriber fuzz target plays, shared with the seed generator.
// Each step is an opcode byte (taken modulo the number of steps) and its operands.
#pragma once

#include <cstdint>

namespace rdma_asio::fuzz::subscriber_script {

// Header: u8 retries (modulo 4), u32 first TID. Then steps:
enum op : std::uint8_t {
    // u8 mask selector, u8 GID count (modulo 4), per GID u8 pool index (an index
    // past the pool reads 16 bytes of GID).
    start_register,
    start_unregister, // operands as start_register
    start_unregister_all,
    reject,
    resubscribe,
    // u8 trap, u8 flags (bit 0: not generic), u8 pool index, u16 TID.
    report,
    // u8 index among the requests awaiting an answer, u16 status, u32 high TID bits;
    // with no request awaiting, an answer to a TID never sent.
    answer,
    // u16 length (modulo 300), then that many bytes: any MAD at all.
    raw_mad,
    // u16 milliseconds to let pass before the timer runs.
    advance_time,
    abandon,
    count
};

/// GIDs the steps name by index: two port GIDs, two multicast groups.
inline constexpr std::uint8_t gid_pool_size = 4;
/// What the mask selector picks (a selector past the table is the raw mask value).
inline constexpr unsigned masks[] = {
    1u << 1,               // ugid
    1u << 0,               // mgid
    1u << 2,               // ugid_all
    1u << 3,               // mgid_all
    1u << 4,               // all
    (1u << 0) | (1u << 1), // mgid | ugid
    (1u << 2) | (1u << 3), // ugid_all | mgid_all
};
inline constexpr std::uint8_t mask_count = sizeof masks / sizeof masks[0];

} // namespace rdma_asio::fuzz::subscriber_script

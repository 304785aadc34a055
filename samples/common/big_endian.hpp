// Numbers in the samples' wire formats (private data, messages, kv slots) are
// big-endian, whatever the host's order.
#pragma once

#include <cstdint>

namespace sample {

/// Writes the low `bytes` bytes of `v` to `p`, most significant first.
inline void put_be(std::uint8_t* p, std::uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i, v >>= 8)
        p[i] = static_cast<std::uint8_t>(v);
}

/// Reads `bytes` bytes from `p`, most significant first.
inline std::uint64_t get_be(const std::uint8_t* p, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
        v = v << 8 | p[i];
    return v;
}

} // namespace sample

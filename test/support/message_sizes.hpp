// Message sizes and contents for the rxe tests that carry many messages over
// streams (Beast's HTTP and websocket): sizes from 0 to 1 MiB, and bodies of random
// bytes that a reader finds again from the message's number, so that every byte is
// checked where it arrives.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace rdma_asio::test {

inline constexpr std::size_t mib = std::size_t{1} << 20;

// `count` message sizes from 0 to 1 MiB: first the edges (empty, one byte, around
// a page, around the stream's default ring of 256 KiB, exactly 1 MiB), then
// sizes spread evenly on a logarithmic scale, so that small and large bodies
// are both common: 69 MB each way in all.
inline std::vector<std::size_t> message_sizes(std::size_t count) {
    std::vector<std::size_t> sizes = {
        0, 1, 4095, 4096, 4097, 65536, 256 * 1024 - 1, 256 * 1024, 256 * 1024 + 1, mib - 1, mib};
    std::mt19937 random(56);
    std::uniform_real_distribution<double> exponent(0.0, std::log(double(mib) + 1));
    while (sizes.size() < count)
        sizes.push_back(std::min(mib, std::size_t(std::exp(exponent(random)) - 1)));
    return sizes;
}

// 2 MiB of random bytes; a message is the slice at an offset that its number
// chooses, the request's and the response's of one number apart.
class message_bodies {
public:
    message_bodies() : pool_(2 * mib) {
        std::mt19937 random(1000);
        for (auto& byte : pool_)
            byte = static_cast<std::uint8_t>(random());
    }
    std::vector<std::uint8_t> request(std::uint32_t number, std::size_t size) const {
        return slice(number * 7919u % mib, size);
    }
    std::vector<std::uint8_t> response(std::uint32_t number, std::size_t size) const {
        return slice((number * 7919u + mib / 2) % mib, size);
    }

private:
    std::vector<std::uint8_t> slice(std::size_t offset, std::size_t size) const {
        return {pool_.begin() + std::ptrdiff_t(offset),
                pool_.begin() + std::ptrdiff_t(offset + size)};
    }
    std::vector<std::uint8_t> pool_;
};

} // namespace rdma_asio::test

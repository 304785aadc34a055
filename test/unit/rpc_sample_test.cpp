// The rpc sample's messages and the server's receive depth in the accept's private
// data (samples/rpc/rpc.hpp), without a device: what the client relies on to tell
// which request a response answers.
#include "rpc/rpc.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

namespace rpc_sample_test {

TEST_CASE("rpc sample: a request and a response survive their encoding", "[rpc_sample]") {
    const rpc::request q{rpc::kind::call, 7, 0xfffffffe, 0x0123'4567'89ab'cdef};
    const rpc::message qm = rpc::encode(q);
    const auto q2 = rpc::decode_request(qm);
    REQUIRE(q2);
    CHECK(q2->what == q.what);
    CHECK(q2->client == q.client);
    CHECK(q2->sequence == q.sequence);
    CHECK(q2->argument == q.argument);

    const rpc::response a{rpc::kind::goodbye, 9999, 3, 42};
    const rpc::message am = rpc::encode(a);
    const auto a2 = rpc::decode_response(am);
    REQUIRE(a2);
    CHECK(a2->what == rpc::kind::goodbye);
    CHECK(a2->client == 9999);
    CHECK(a2->sequence == 3);
    CHECK(a2->result == 42);

    // One is not taken for the other, and a short or altered message is refused.
    CHECK_FALSE(rpc::decode_response(qm));
    CHECK_FALSE(rpc::decode_request(am));
    CHECK_FALSE(rpc::decode_request(std::span(qm).first(rpc::message_size - 1)));
    rpc::message unknown_kind = qm;
    unknown_kind[7] = 3;
    CHECK_FALSE(rpc::decode_request(unknown_kind));
}

TEST_CASE("rpc sample: the answer depends on every bit of the argument", "[rpc_sample]") {
    const std::uint64_t argument = 0x0000'0005'0000'0002; // client 5, call 2
    for (int bit = 0; bit < 64; ++bit)
        CHECK(rpc::answer(argument ^ (std::uint64_t{1} << bit)) != rpc::answer(argument));
    CHECK(rpc::answer(argument) == rpc::answer(argument));
}

TEST_CASE("rpc sample: the server's depth survives the accept's private data", "[rpc_sample]") {
    const rpc::accept_data data = rpc::encode_depth(256);
    // rdma_cm pads private data with zeros: a longer buffer still decodes.
    std::vector<std::uint8_t> padded(data.begin(), data.end());
    padded.resize(196, 0);
    CHECK(rpc::decode_depth(data.data(), data.size()) == 256u);
    CHECK(rpc::decode_depth(padded.data(), padded.size()) == 256u);
    CHECK_FALSE(rpc::decode_depth(nullptr, 0));
    CHECK_FALSE(rpc::decode_depth(data.data(), data.size() - 1));
    const std::vector<std::uint8_t> zeros(196, 0); // a server that sent no data
    CHECK_FALSE(rpc::decode_depth(zeros.data(), zeros.size()));
}

} // namespace rpc_sample_test

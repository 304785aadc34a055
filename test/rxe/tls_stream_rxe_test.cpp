// TLS over rdma_asio::stream: asio::ssl::stream<rdma_asio::stream> with
// OpenSSL, a handshake and 1 MiB each way, every byte checked, over rxe0
// loopback (10.0.0.1 in the test VM). The certificate is a self-signed P-256 one
// made for this test (openssl req -x509, valid until 2126); the client checks it
// against itself.
#include <rdma_asio/stream.hpp>

#include "asio_alias.hpp"

#if RDMA_ASIO_USE_BOOST_ASIO
#include <boost/asio/ssl.hpp>
#else
#include <asio/ssl.hpp>
#endif

#include <catch2/catch.hpp>

#include "rxe_loopback.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace {

const char* const test_certificate = R"(-----BEGIN CERTIFICATE-----
MIIBiTCCAS+gAwIBAgIUOTPpk6IJ69YAoWK78tPEAKZWgrMwCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwOcmRtYS1hc2lvLXRlc3QwIBcNMjYxMTI5MjI0NTM4WhgPMjEy
NjExMDUyMjQ1MzhaMBkxFzAVBgNVBAMMDnJkbWEtYXNpby10ZXN0MFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAEVTlfK9uVPjGGoQyCyKCbauPS3jA7B8NZUFyEusun
A0xk1SDKNc/LH80OmC2buvIRYLvAzfJV6kgT34Zq4nM47KNTMFEwHQYDVR0OBBYE
FH34k62H+TSdhMG2q8z3znINgnXAMB8GA1UdIwQYMBaAFH34k62H+TSdhMG2q8z3
znINgnXAMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIgWmAxsBfn
sSb+IjlySg5laQBThAoYemzY7B4CATCT2wECIQDUIZNCrl/vsOJQ8KEKS1cbSpZq
v8wASXSWjSDZi0YbqA==
-----END CERTIFICATE-----
)";
const char* const test_key = R"(-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgLfPvMUajnUlfhmfh
8YG6W2hsiVuragn5NwnmFsdhk4ChRANCAARVOV8r25U+MYahDILIoJtq49LeMDsH
w1lQXIS6y6cDTGTVIMo1z8sfzQ6YLZu68hFgu8DN8lXqSBPfhmriczjs
-----END PRIVATE KEY-----
)";

} // namespace

TEST_CASE("TLS over a stream: asio::ssl::stream<rdma_asio::stream> does its handshake and "
          "carries 1 MiB each way",
          "[stream][tls]") {
    using namespace std::chrono_literals;
    using asio::use_awaitable;
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, rdma_asio::test::rxe0_endpoint(18882));
    asio::ssl::context server_ctx(asio::ssl::context::tls_server);
    server_ctx.use_certificate_chain(asio::buffer(std::string(test_certificate)));
    server_ctx.use_private_key(asio::buffer(std::string(test_key)), asio::ssl::context::pem);
    asio::ssl::context client_ctx(asio::ssl::context::tls_client);
    client_ctx.add_certificate_authority(asio::buffer(std::string(test_certificate)));
    client_ctx.set_verify_mode(asio::ssl::verify_peer);
    const std::size_t size = 1 << 20;
    const auto to_client = rdma_asio::test::byte_pattern(size, 3),
               to_server = rdma_asio::test::byte_pattern(size, 4);
    std::vector<std::uint8_t> at_client(size), at_server(size);
    rdma_asio::test::run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc);
            co_await rdma_asio::async_accept(acceptor, s, use_awaitable);
            asio::ssl::stream<rdma_asio::stream> tls(std::move(s), server_ctx);
            co_await tls.async_handshake(asio::ssl::stream_base::server, use_awaitable);
            co_await asio::async_read(tls, asio::buffer(at_server), use_awaitable);
            co_await asio::async_write(tls, asio::buffer(to_client), use_awaitable);
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc);
            co_await rdma_asio::async_connect(s, rdma_asio::test::rxe0_endpoint(18882),
                                              use_awaitable);
            asio::ssl::stream<rdma_asio::stream> tls(std::move(s), client_ctx);
            co_await tls.async_handshake(asio::ssl::stream_base::client, use_awaitable);
            co_await asio::async_write(tls, asio::buffer(to_server), use_awaitable);
            co_await asio::async_read(tls, asio::buffer(at_client), use_awaitable);
        }(),
        120s);
    CHECK(rdma_asio::test::byte_difference(at_server, to_server) == "");
    CHECK(rdma_asio::test::byte_difference(at_client, to_client) == "");
}

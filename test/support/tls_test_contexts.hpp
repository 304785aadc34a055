// A TLS server's and a client's contexts for the rxe tests over streams
// (asio::ssl::stream<rdma_asio::stream>, Beast's websocket over it): the
// certificate is a self-signed P-256 one made for these tests (openssl req -x509,
// valid until 2126), the client checks the server's against itself.
#pragma once

#include "asio_alias.hpp"

#if RDMA_ASIO_USE_BOOST_ASIO
#include <boost/asio/ssl.hpp>
#else
#include <asio/ssl.hpp>
#endif

#include <string>

namespace rdma_asio::test {

inline const char* const test_certificate = R"(-----BEGIN CERTIFICATE-----
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
inline const char* const test_key = R"(-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgLfPvMUajnUlfhmfh
8YG6W2hsiVuragn5NwnmFsdhk4ChRANCAARVOV8r25U+MYahDILIoJtq49LeMDsH
w1lQXIS6y6cDTGTVIMo1z8sfzQ6YLZu68hFgu8DN8lXqSBPfhmriczjs
-----END PRIVATE KEY-----
)";

inline asio::ssl::context tls_server_context() {
    asio::ssl::context ctx(asio::ssl::context::tls_server);
    ctx.use_certificate_chain(asio::buffer(std::string(test_certificate)));
    ctx.use_private_key(asio::buffer(std::string(test_key)), asio::ssl::context::pem);
    return ctx;
}

inline asio::ssl::context tls_client_context() {
    asio::ssl::context ctx(asio::ssl::context::tls_client);
    ctx.add_certificate_authority(asio::buffer(std::string(test_certificate)));
    ctx.set_verify_mode(asio::ssl::verify_peer);
    return ctx;
}

} // namespace rdma_asio::test

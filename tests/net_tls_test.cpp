// src/net/tls.h: serve's certificate and key are checked before it starts,
// each error naming the file; a client's handshake failures are explained
// and classified; a pinned certificate is trusted whatever its name and
// issuer, and nothing else is. Certificates are made with the openssl
// command (skipped without it); handshakes run on loopback in-process.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <unistd.h>

#include "core/error.h"
#include "net/tls.h"

namespace {

using namespace bonfire;
using namespace bonfire::net;
namespace asio = boost::asio;
namespace fs = std::filesystem;

class NetTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::system("openssl version > /dev/null 2>&1") != 0) return;
    dir_ = fs::temp_directory_path() / ("bonfire_tls_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    // Two unrelated self-signed certificates for 127.0.0.1 and localhost.
    for (const std::string name : {"a", "b"}) {
      const std::string cmd = "cd " + dir_.string() + " && openssl req -x509" + key + " -keyout " + name +
                              ".key -out " + name + ".pem -days 30 -subj /CN=localhost" +
                              " -addext subjectAltName=DNS:localhost,IP:127.0.0.1 > /dev/null 2>&1";
      if (std::system(cmd.c_str()) != 0) return;
    }
    std::ofstream(dir_ / "garbage.pem") << "not a certificate\n";
    ready_ = true;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  void SetUp() override {
    if (!ready_) GTEST_SKIP() << "the openssl command could not make test certificates";
  }
  static std::string file(const std::string& name) { return (dir_ / name).string(); }

  // One handshake on loopback: serve `cert`, dial 127.0.0.1 as `host`.
  // Returns the client's explanation ("" when it succeeded).
  static std::string handshake(const std::string& cert, const TlsClient& client, const std::string& host,
                               bool* refusal = nullptr) {
    auto server_ctx = tls_server_context(file(cert + ".pem"), file(cert + ".key"));
    asio::io_context io;
    asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
    TlsStream server(io, *server_ctx), peer(io, client.context());
    acceptor.async_accept(boost::beast::get_lowest_layer(server).socket(), [&](boost::system::error_code ec) {
      if (!ec) server.async_handshake(asio::ssl::stream_base::server, [](boost::system::error_code) {});
    });
    boost::system::error_code result;
    client.prepare(peer, host);
    boost::beast::get_lowest_layer(peer).async_connect(acceptor.local_endpoint(), [&](boost::system::error_code ec) {
      if (ec) {
        result = ec;
        return;
      }
      peer.async_handshake(asio::ssl::stream_base::client, [&](boost::system::error_code e) {
        result = e;
        boost::beast::get_lowest_layer(server).close();  // done either way
      });
    });
    io.run_for(std::chrono::seconds(10));
    if (!result) return "";
    const auto f = client.explain(result, peer, host, "https://" + host);
    if (refusal) *refusal = f.refusal;
    return f.message;
  }

  static inline fs::path dir_;
  static inline bool ready_ = false;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(NetTls, ServerFilesAreCheckedNamingTheFile) {
  EXPECT_NO_THROW(tls_server_context(file("a.pem"), file("a.key")));
  EXPECT_NE(error_of([&] { tls_server_context(file("none.pem"), file("a.key")); }).find("--tls-cert " + file("none.pem")),
            std::string::npos);
  EXPECT_NE(error_of([&] { tls_server_context(file("a.pem"), file("none.key")); }).find("--tls-key " + file("none.key")),
            std::string::npos);
  EXPECT_NE(error_of([&] { tls_server_context(file("garbage.pem"), file("a.key")); })
                .find("--tls-cert " + file("garbage.pem") + ": not a PEM certificate"),
            std::string::npos);
  EXPECT_NE(error_of([&] { tls_server_context(file("a.pem"), file("garbage.pem")); })
                .find("--tls-key " + file("garbage.pem") + ": not an unencrypted PEM private key"),
            std::string::npos);
  const std::string mismatch = error_of([&] { tls_server_context(file("a.pem"), file("b.key")); });
  EXPECT_NE(mismatch.find("--tls-key " + file("b.key") + " does not match the certificate"), std::string::npos)
      << mismatch;
}

TEST_F(NetTls, ClientFilesAreChecked) {
  EXPECT_NE(error_of([&] { TlsClient({file("none.pem")}); }).find("--ca " + file("none.pem")), std::string::npos);
  EXPECT_NE(error_of([&] { TlsClient({file("garbage.pem")}); }).find("--ca " + file("garbage.pem")),
            std::string::npos);
}

TEST_F(NetTls, VerificationNamesTheProblem) {
  const TlsClient trusting_a({file("a.pem")});
  EXPECT_EQ(handshake("a", trusting_a, "127.0.0.1"), "");
  EXPECT_EQ(handshake("a", trusting_a, "localhost"), "");  // a name, with SNI
  bool refusal = false;
  const std::string other = handshake("b", trusting_a, "127.0.0.1", &refusal);
  EXPECT_TRUE(refusal);
  EXPECT_NE(other.find("is not trusted (self-signed certificate)"), std::string::npos) << other;
  const std::string name = handshake("a", trusting_a, "example.invalid");  // dialled 127.0.0.1 all the same
  EXPECT_NE(name.find("is not for example.invalid (hostname mismatch)"), std::string::npos) << name;
  const std::string address = handshake("a", trusting_a, "127.0.0.2");
  EXPECT_NE(address.find("is not for 127.0.0.2 (IP address mismatch)"), std::string::npos) << address;
}

}  // namespace

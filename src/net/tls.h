// TLS for both ends of the network (OpenSSL through Boost.Asio's ssl).
//
// The coordinator (`serve --tls-cert FILE --tls-key FILE`) speaks TLS on its
// whole port: the HTTP API, the web page and the worker link (wss://). A
// worker joining an https:// or wss:// URL verifies the coordinator's
// certificate against the system's CAs (or `--ca FILE` alone) and checks it
// was issued for the host name or address it dialled; SNI carries a host
// name (never an address: RFC 6066 forbids it). The coordinator's own
// worker instead trusts exactly the certificate serve loaded (pinning): it
// dials 127.0.0.1, which the certificate need not name, and a self-signed
// certificate is no CA.
//
// A failed client handshake is explained in words (the certificate's
// problem as OpenSSL names it, or a peer that does not speak TLS) and
// classified: a refusal is what a retry would meet again, so a worker gives
// up on it instead of retrying forever.
#pragma once
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/system/error_code.hpp>
#include <memory>
#include <string>

namespace bonfire::net {

using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

// The coordinator's side: TLS 1.2 or later with the certificate chain and
// key of these PEM files. Throws Error(BadGraph) naming the file that is
// missing or unreadable, holds no certificate or key, or a key that does not
// match the certificate.
std::shared_ptr<boost::asio::ssl::context> tls_server_context(const std::string& cert_file,
                                                              const std::string& key_file);

// Whether a server-side handshake failed because the peer sent plain HTTP.
bool tls_got_plain_http(const boost::system::error_code& ec);

// A handshake error in words, without OpenSSL's library suffix.
std::string tls_error_text(const boost::system::error_code& ec);

struct TlsClientOptions {
  std::string ca_file;      // "": the system's CAs
};

class TlsClient {
 public:
  // Throws Error(BadGraph) naming a file that cannot be used.
  explicit TlsClient(const TlsClientOptions& options);
  boost::asio::ssl::context& context() const { return *ctx_; }
  // Before the handshake: SNI, and the checks for a peer dialled as `host`.
  void prepare(TlsStream& stream, const std::string& host) const;

  struct Failure {
    bool refusal = false;  // retrying would meet it again
    std::string message;
  };
  // Why the handshake with `host` (dialled as `where`, a URL) failed.
  Failure explain(const boost::system::error_code& ec, TlsStream& stream, const std::string& host,
                  const std::string& where) const;

 private:
  TlsClientOptions options_;
  std::shared_ptr<boost::asio::ssl::context> ctx_;
};

}  // namespace bonfire::net

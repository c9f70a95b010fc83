#include "net/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core/error.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace bonfire::net {

namespace ssl = boost::asio::ssl;

namespace {

// TLS 1.2 and 1.3 only: the older versions have known attacks and every
// client that speaks to a coordinator has something newer.
constexpr long kContextOptions = ssl::context::default_workarounds | ssl::context::no_sslv2 |
                                 ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                                 ssl::context::single_dh_use;

bool is_address(const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  return !ec;
}

int ssl_reason(const boost::system::error_code& ec) {
  return ec.category() == boost::asio::error::get_ssl_category() ? ERR_GET_REASON(ec.value()) : 0;
}

// A file named on the command line must be readable before OpenSSL's
// messages (which do not name it) get a say.
void require_readable(const std::string& file, const std::string& flag) {
  std::ifstream f(file);
  if (!f) throw Error(ErrorCode::BadGraph, flag + " " + file + ": cannot read it (" + std::strerror(errno) + ")");
}

// Whether a PEM file holds an unencrypted private key (any key at all).
bool holds_private_key(const std::string& file) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_file(file.c_str(), "r"), &BIO_free);
  if (!bio) return false;
  // A null callback with a non-null argument uses it as the passphrase:
  // an encrypted key fails here instead of prompting on the terminal.
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, const_cast<char*>(""));
  ERR_clear_error();
  if (!key) return false;
  EVP_PKEY_free(key);
  return true;
}

}  // namespace

std::string tls_error_text(const boost::system::error_code& ec) {
  if (ec.category() == boost::asio::error::get_ssl_category()) {
    if (const char* reason = ERR_reason_error_string(static_cast<unsigned long>(ec.value()))) return reason;
  }
  if (ec == boost::asio::ssl::error::stream_truncated) return "the peer closed the connection";
  if (ec == boost::beast::error::timeout) return "no answer in time";
  return ec.message();
}

bool tls_got_plain_http(const boost::system::error_code& ec) { return ssl_reason(ec) == SSL_R_HTTP_REQUEST; }

std::shared_ptr<ssl::context> tls_server_context(const std::string& cert_file, const std::string& key_file) {
  require_readable(cert_file, "--tls-cert");
  require_readable(key_file, "--tls-key");
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(kContextOptions);
  // Never prompt for a passphrase: serve runs unattended.
  ctx->set_password_callback([](size_t, ssl::context::password_purpose) { return std::string(); });
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec)
    throw Error(ErrorCode::BadGraph,
                "--tls-cert " + cert_file + ": not a PEM certificate chain (" + tls_error_text(ec) + ")");
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  if (!ec && SSL_CTX_check_private_key(ctx->native_handle()) != 1) ec = {EINVAL, boost::system::generic_category()};
  if (ec) {
    if (holds_private_key(key_file))
      throw Error(ErrorCode::BadGraph,
                  "--tls-key " + key_file + " does not match the certificate in --tls-cert " + cert_file);
    throw Error(ErrorCode::BadGraph, "--tls-key " + key_file + ": not an unencrypted PEM private key (" +
                                         tls_error_text(ec) + ")");
  }
  return ctx;
}

TlsClient::TlsClient(const TlsClientOptions& options)
    : options_(options), ctx_(std::make_shared<ssl::context>(ssl::context::tls_client)) {
  ctx_->set_options(kContextOptions);
  ctx_->set_verify_mode(ssl::verify_peer);
  boost::system::error_code ec;
  if (!options_.ca_file.empty()) {
    require_readable(options_.ca_file, "--ca");
    ctx_->load_verify_file(options_.ca_file, ec);
    if (ec)
      throw Error(ErrorCode::BadGraph, "--ca " + options_.ca_file + ": no PEM certificate in it (" +
                                           tls_error_text(ec) + ")");
  } else {
    ctx_->set_default_verify_paths(ec);
    if (ec) throw Error(ErrorCode::Internal, "cannot load the system's CA certificates: " + tls_error_text(ec));
  }
}

void TlsClient::prepare(TlsStream& stream, const std::string& host) const {
  if (!is_address(host)) SSL_set_tlsext_host_name(stream.native_handle(), host.c_str());
  // host_name_verification only says no; recording why lets explain() name
  // a wrong name as such instead of a bare "certificate verify failed".
  stream.set_verify_callback([host, address = is_address(host)](bool preverified, ssl::verify_context& v) {
    const bool ok = ssl::host_name_verification(host)(preverified, v);
    if (preverified && !ok)
      X509_STORE_CTX_set_error(v.native_handle(),
                               address ? X509_V_ERR_IP_ADDRESS_MISMATCH : X509_V_ERR_HOSTNAME_MISMATCH);
    return ok;
  });
}

TlsClient::Failure TlsClient::explain(const boost::system::error_code& ec, TlsStream& stream,
                                      const std::string& host, const std::string& where) const {
  const int reason = ssl_reason(ec);
  if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED) {
    const long v = SSL_get_verify_result(stream.native_handle());
    const std::string why = X509_verify_cert_error_string(v);
    switch (v) {
      case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
      case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
      case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      case X509_V_ERR_CERT_UNTRUSTED:
        return {true, "the coordinator's certificate is not trusted (" + why + "): " +
                          (options_.ca_file.empty() ? "pass --ca FILE with the CA that signed it"
                                                    : "--ca " + options_.ca_file + " is not the CA that signed it")};
      case X509_V_ERR_HOSTNAME_MISMATCH:
      case X509_V_ERR_IP_ADDRESS_MISMATCH:
        return {true, "the coordinator's certificate is not for " + host + " (" + why +
                          "): join with a host name or address the certificate holds"};
      case X509_V_ERR_CERT_HAS_EXPIRED:
      case X509_V_ERR_CERT_NOT_YET_VALID:
        return {true, "the coordinator's certificate is not valid now (" + why + "): it needs a new one"};
      default:
        return {true, "the coordinator's certificate was refused (" + why + ")"};
    }
  }
  // A plain HTTP server answers a ClientHello with an HTTP error, which
  // OpenSSL reads as a record of an unknown version.
  if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_UNKNOWN_PROTOCOL || reason == SSL_R_PACKET_LENGTH_TOO_LONG)
    return {true, "the coordinator does not speak TLS (" + tls_error_text(ec) +
                      "): if it serves plain HTTP, join with http://"};
  // Any other TLS error (no common version or cipher, an alert) is a
  // mismatch a retry would meet again; a dropped or slow connection is not.
  if (reason != 0) return {true, "the TLS handshake with " + where + " failed: " + tls_error_text(ec)};
  return {false, "the TLS handshake with " + where + " failed: " + tls_error_text(ec)};
}

}  // namespace bonfire::net

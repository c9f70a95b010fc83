// How a worker reaches its coordinator: TCP, then TLS when the join URL is
// https:// or wss:// (tls.h: the certificate is verified), then the
// WebSocket upgrade, each step with a deadline; and the model downloads,
// over the same kind of connection with the same verification.
//
// A failure says whether a retry could help. Refused: the coordinator
// answered but never will as asked (its certificate is not trusted, expired
// or for another name; it does not speak the URL's scheme; no WebSocket at
// the path), so a worker gives up with the reason. Unreachable (no route,
// nothing listening) and Failed (a reset, a deadline, a busy server) may
// pass, so a worker retries.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <cstdint>
#include <string>
#include <variant>

#include "core/error.h"
#include "net/link.h"
#include "net/tls.h"
#include "net/url.h"

namespace bonfire::net {

struct DialError : Error {
  enum class Kind { Unreachable, Failed, Refused };
  DialError(Kind kind, const std::string& message) : Error(ErrorCode::NoWorker, message), kind(kind) {}
  Kind kind;
};

using LinkStream = std::variant<WsStream, WssStream>;

// A WebSocket to the coordinator at `url`, handshakes done, on `io` (which
// runs it). `tls` verifies the coordinator when url.tls; it must outlive the
// stream. Throws DialError.
LinkStream dial_link(boost::asio::io_context& io, const Url& url, const TlsClient* tls);

// A blocking HTTP(S) GET of base+path into `file` (written to file.part and
// renamed only when complete). At most `max_bytes`; throws Error on failure:
// DialError when the coordinator cannot be reached (as for dial_link, whose
// `tls` this is too), Error(Timeout) when no byte arrives for `stall_s`
// seconds.
void http_download(const Url& server, const TlsClient* tls, const std::string& path, const std::string& file,
                   int64_t max_bytes, const std::string& bearer, double stall_s = 30);

// Runs one asynchronous operation started by `start(handler)` on `io` to
// completion and returns its error. Blocking Beast calls ignore a stream's
// expires_after; asynchronous ones honour it, so code that wants a deadline
// on a blocking step starts it through this.
template <class Start>
boost::system::error_code run_io(boost::asio::io_context& io, Start&& start) {
  boost::system::error_code ec;
  start([&ec](const boost::system::error_code& e, auto&&...) { ec = e; });
  io.restart();
  io.run();
  return ec;
}

}  // namespace bonfire::net

#include "core/error.h"

namespace bonfire {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::BadGraph: return "bad_graph";
    case ErrorCode::UnsupportedFeature: return "unsupported_feature";
    case ErrorCode::NoWorker: return "no_worker";
    case ErrorCode::SessionNotFound: return "session_not_found";
    case ErrorCode::TooLarge: return "too_large";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::Internal: return "internal";
  }
  return "internal";
}

int error_http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::BadGraph: return 400;
    case ErrorCode::UnsupportedFeature: return 422;
    case ErrorCode::NoWorker: return 503;
    case ErrorCode::SessionNotFound: return 404;
    case ErrorCode::TooLarge: return 413;
    case ErrorCode::Timeout: return 504;
    case ErrorCode::Internal: return 500;
  }
  return 500;
}

std::string bounded_text(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // not inside a character
  return s.substr(0, n) + "...";
}

}  // namespace bonfire

// The browser worker runs graphs; the coordinator does all text work
// (tokenizing, chat templates). PCRE2 and utf8proc, which that text work
// uses, have no WebAssembly build among Debian's packages, so here their
// entry points fail loudly if anything ever reaches them. The worker opens
// models with LocalModel::Options::tokenizer = false, so nothing does; a
// regression would surface as this error, never as wrong text.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include "core/error.h"

namespace {

[[noreturn]] void unavailable(const char* what) {
  throw bonfire::Error(bonfire::ErrorCode::Internal,
                       std::string("the browser worker does no text processing (") + what + " is not built for WebAssembly)");
}

}  // namespace

extern "C" {

pcre2_code* pcre2_compile_8(PCRE2_SPTR, PCRE2_SIZE, uint32_t, int*, PCRE2_SIZE*, pcre2_compile_context*) {
  unavailable("PCRE2");
}
void pcre2_code_free_8(pcre2_code*) {}
int pcre2_jit_compile_8(pcre2_code*, uint32_t) { unavailable("PCRE2"); }
pcre2_match_data* pcre2_match_data_create_8(uint32_t, pcre2_general_context*) { unavailable("PCRE2"); }
void pcre2_match_data_free_8(pcre2_match_data*) {}
pcre2_match_context* pcre2_match_context_create_8(pcre2_general_context*) { unavailable("PCRE2"); }
void pcre2_match_context_free_8(pcre2_match_context*) {}
pcre2_jit_stack* pcre2_jit_stack_create_8(PCRE2_SIZE, PCRE2_SIZE, pcre2_general_context*) { unavailable("PCRE2"); }
void pcre2_jit_stack_assign_8(pcre2_match_context*, pcre2_jit_callback, void*) {}
void pcre2_jit_stack_free_8(pcre2_jit_stack*) {}
int pcre2_match_8(const pcre2_code*, PCRE2_SPTR, PCRE2_SIZE, PCRE2_SIZE, uint32_t, pcre2_match_data*,
                  pcre2_match_context*) {
  unavailable("PCRE2");
}
int pcre2_jit_match_8(const pcre2_code*, PCRE2_SPTR, PCRE2_SIZE, PCRE2_SIZE, uint32_t, pcre2_match_data*,
                      pcre2_match_context*) {
  unavailable("PCRE2");
}
PCRE2_SIZE* pcre2_get_ovector_pointer_8(pcre2_match_data*) { unavailable("PCRE2"); }
int pcre2_get_error_message_8(int, PCRE2_UCHAR*, PCRE2_SIZE) { unavailable("PCRE2"); }

utf8proc_ssize_t utf8proc_decompose_char(utf8proc_int32_t, utf8proc_int32_t*, utf8proc_ssize_t, utf8proc_option_t,
                                         int*) {
  unavailable("utf8proc");
}
utf8proc_int32_t utf8proc_tolower(utf8proc_int32_t) { unavailable("utf8proc"); }
utf8proc_int32_t utf8proc_toupper(utf8proc_int32_t) { unavailable("utf8proc"); }
utf8proc_category_t utf8proc_category(utf8proc_int32_t) { unavailable("utf8proc"); }
utf8proc_ssize_t utf8proc_map(const utf8proc_uint8_t*, utf8proc_ssize_t, utf8proc_uint8_t**, utf8proc_option_t) {
  unavailable("utf8proc");
}

}  // extern "C"

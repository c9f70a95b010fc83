// WebAssembly exceptions with pthreads, as Debian's toolchain builds them:
// clang 14 compiles every landing pad to write `__wasm_lpad_context` as an
// ordinary global, while emscripten 3.1.6's libunwind defines it
// thread-local; linked together, the personality routine reads a context
// nobody wrote and no typed `catch` ever matches (a `catch (const Error&)` is
// skipped, only `catch (...)` runs). This file gives the linker the whole
// of libunwind's WebAssembly part (so that archive member is never pulled
// in) with the context as the ordinary global the compiled code expects.
//
// The cost: one context for all threads. It is used only while an exception
// is being caught (between a landing pad and its personality call), so two
// threads would have to catch typed exceptions at the same instant to
// collide; the compute pool's helpers catch with `catch (...)`, which needs
// no selector. bf_start checks that a typed catch matches before it joins.
#include <unwind.h>

#include <cstdint>

namespace {
struct LandingPadContext {
  uintptr_t lpad_index;  // written by the landing pad
  uintptr_t lsda;        // written by the landing pad
  uintptr_t selector;    // written by the personality routine
};
}  // namespace

extern "C" {

LandingPadContext __wasm_lpad_context;

_Unwind_Reason_Code __gxx_personality_wasm0(int version, _Unwind_Action actions, uint64_t exception_class,
                                            _Unwind_Exception* exception, _Unwind_Context* context);

// WebAssembly unwinds in one phase: the personality runs the cleanup phase
// only, and leaves its choice of catch clause in the context's selector.
_Unwind_Reason_Code _Unwind_CallPersonality(void* exception_ptr) {
  auto* exception = static_cast<_Unwind_Exception*>(exception_ptr);
  __wasm_lpad_context.selector = 0;
  return __gxx_personality_wasm0(1, _UA_CLEANUP_PHASE, exception->exception_class, exception,
                                 reinterpret_cast<_Unwind_Context*>(&__wasm_lpad_context));
}

_Unwind_Reason_Code _Unwind_RaiseException(_Unwind_Exception* exception) { __builtin_wasm_throw(0, exception); }

void _Unwind_DeleteException(_Unwind_Exception* exception) {
  if (exception->exception_cleanup) exception->exception_cleanup(_URC_FOREIGN_EXCEPTION_CAUGHT, exception);
}

void _Unwind_SetGR(_Unwind_Context* context, int index, _Unwind_Word value) {
  if (index == 1) reinterpret_cast<LandingPadContext*>(context)->selector = value;
}

// The personality's call-site table is indexed by landing pad, offset by
// the two it skips (as libunwind reports it).
_Unwind_Word _Unwind_GetIP(_Unwind_Context* context) {
  return reinterpret_cast<LandingPadContext*>(context)->lpad_index + 2;
}

void _Unwind_SetIP(_Unwind_Context*, _Unwind_Word) {}

void* _Unwind_GetLanguageSpecificData(_Unwind_Context* context) {
  return reinterpret_cast<void*>(reinterpret_cast<LandingPadContext*>(context)->lsda);
}

_Unwind_Ptr _Unwind_GetRegionStart(_Unwind_Context*) { return 0; }

}  // extern "C"

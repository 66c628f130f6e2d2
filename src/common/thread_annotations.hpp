// Clang's thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html): they
// state which mutex protects which data and which functions expect it held, and clang's
// -Wthread-safety checks every access against them at compile time (the clang-tsa preset,
// docs/testing.md). Other compilers see nothing: the macros expand to nothing there.
//
//   int hits_ GUARDED_BY(mu_);             // read or written only while mu_ is held
//   void evict() REQUIRES(mu_);            // the caller holds mu_
//   void flush() EXCLUDES(mu_);            // the caller must not hold mu_ (it takes it)
//
// common/mutex.hpp has the mutex and lock types these name.
#pragma once

#if defined(__clang__)
#define LH_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define LH_THREAD_ANNOTATION(x)
#endif

// On a class: its objects are capabilities (mutexes) the analysis tracks.
#define CAPABILITY(name) LH_THREAD_ANNOTATION(capability(name))
// On a class: an RAII object that holds the capabilities its constructor acquires.
#define SCOPED_CAPABILITY LH_THREAD_ANNOTATION(scoped_lockable)
// On a data member: accessed only with the capability held.
#define GUARDED_BY(x) LH_THREAD_ANNOTATION(guarded_by(x))
// On a pointer member: what it points to is accessed only with the capability held.
#define PT_GUARDED_BY(x) LH_THREAD_ANNOTATION(pt_guarded_by(x))
// On a function: the caller holds these capabilities (and still holds them on return).
#define REQUIRES(...) LH_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// On a function: the caller does not hold these (the function acquires them itself).
#define EXCLUDES(...) LH_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: it acquires / releases these capabilities (no argument: `this`).
#define ACQUIRE(...) LH_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) LH_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// On a function returning bool: it acquired the capabilities when it returns `result`.
#define TRY_ACQUIRE(...) LH_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// On a function: the analysis may assume the capability held after the call.
#define ASSERT_CAPABILITY(x) LH_THREAD_ANNOTATION(assert_capability(x))
// On a function: it returns a reference to this capability.
#define RETURN_CAPABILITY(x) LH_THREAD_ANNOTATION(lock_returned(x))
// On a function: the analysis skips its body. Say why next to every use.
#define NO_THREAD_SAFETY_ANALYSIS LH_THREAD_ANNOTATION(no_thread_safety_analysis)

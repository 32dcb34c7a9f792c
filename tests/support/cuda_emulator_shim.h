// CPU stand-ins for what generated CUDA C uses, so that a translation unit of
// compiler/codegen_cuda.py compiles with g++ and runs on the CPU (tests/support/cuda_emulator.py).
//
// Force-included before the kernels' source (g++ -include cuda_emulator_shim.h), after the
// source's #include <cuda_fp16.h> / <cuda_bf16.h> lines are removed and its
// `extern __shared__ ... name[];` lines rewritten to take `tvms_emu__dynamic_smem`.
//
// Execution model: the threads of a block are fibers on the one OS thread that calls the
// launcher (started with makecontext, switched with _setjmp/_longjmp: no system call per
// switch); blocks run one after another. A fiber runs until it reaches __syncthreads() or a
// warp shuffle (__shfl_xor_sync, __shfl_sync, __shfl_up_sync, __shfl_down_sync, __syncwarp),
// then the next fiber runs; a barrier opens when every thread still running has reached it
// (threads that returned no longer count, as on sm_70+), a shuffle when every lane its mask
// names has reached it. That makes a run deterministic, lets the emulator tell a deadlock or a
// divergent barrier from a slow kernel, and keeps 1024-thread blocks cheap on a 2-core machine
// (no OS thread per CUDA thread: 300 blocks of 1024 threads with a dozen barriers and
// shuffles each take about 0.4 s).
//
// Checks (reported as errors, first ones kept, read with tvms_emu__errors()):
// - __syncthreads() reached at different places by the threads of a block (divergent barrier),
//   a deadlock (some threads in a barrier, the others in a shuffle or finished);
// - a shuffle whose mask names a lane that does not take part (exited, absent, elsewhere), a
//   lane that reads a lane that does not take part, threads of one warp with different masks;
// - shared memory is filled with 0xff bytes (NaN for floats, -1 for ints) before each block,
//   so a read of shared memory no thread of the block wrote shows up in the results;
// - with -fsanitize=bounds,alignment: an index past a fixed-size array (local or shared), a
//   vector access (float4, half2...) at an address not aligned for it;
// - with -ftrivial-auto-var-init=pattern, a local variable read before it is written holds
//   0xfe bytes (-1.7e38 as a float), which shows up in the results.
// Threads run in increasing linear order in even blocks and decreasing order in odd ones, so a
// missing barrier shows up whichever of the two threads involved runs first.
// Counters (cuda_emulator_counters.h): the trace mode's memory accesses and operations, per launch.
// PTX's ldmatrix, mma.sync and cp.async (cuda_emulator_ptx.h): the helpers the printer calls for
// them, which generated code defines only when TVMS_CUDA_EMULATOR is not.

#pragma once

#define TVMS_CUDA_EMULATOR 1

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <setjmp.h>
#include <ucontext.h>

#include <mutex>
#include <type_traits>

// One translation unit (the default): everything below is static, in the kernels' own unit.
// Split (tests/support/cuda_emulator.py, where g++ can): the runtime (the fiber scheduler, the
// launcher, the checks' bookkeeping, the counters' and cp.async's flushing) is compiled once
// with TVMS_EMU_RUNTIME and linked into each module's shared object; the kernels' unit, with
// TVMS_EMU_KERNELS, sees its state as hidden externs and its functions as declarations. Each
// shared object still has its own copy of the state; only g++'s work per module shrinks.
#if defined(TVMS_EMU_KERNELS)
#define TVMS_EMU_STATE extern __attribute__((visibility("hidden")))
#define TVMS_EMU_INIT(...)
#define TVMS_EMU_FN __attribute__((visibility("hidden")))
#elif defined(TVMS_EMU_RUNTIME)
#define TVMS_EMU_STATE __attribute__((visibility("hidden")))
#define TVMS_EMU_INIT(...) __VA_ARGS__
#define TVMS_EMU_FN __attribute__((visibility("hidden")))
#else
#define TVMS_EMU_STATE static
#define TVMS_EMU_INIT(...) __VA_ARGS__
#define TVMS_EMU_FN static
#endif

// ----------------------------------------------------------------------------- qualifiers

#define __global__
#define __device__
#define __host__
#define __noinline__ __attribute__((noinline))
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Shared arrays are function-local statics (one copy, shared by the fibers of the running
// block) in a section of their own, which the launcher poisons before each block.
#define __shared__ static __attribute__((section("tvms_shared")))
#define __constant__ static

// ----------------------------------------------------------------------------- built-in variables

struct uint3 { unsigned x, y, z; };
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
TVMS_EMU_STATE uint3 threadIdx, blockIdx;
TVMS_EMU_STATE dim3 blockDim, gridDim;
static const int warpSize = 32;

// ----------------------------------------------------------------------------- half, bfloat16

typedef _Float16 half;
typedef _Float16 __half;

static inline half __float2half_rn(float f) { return (half)f; }
static inline half __float2half(float f) { return (half)f; }
static inline float __half2float(half h) { return (float)h; }
static inline half __int2half_rn(int i) { return (half)(float)i; }
static inline half __double2half(double d) { return (half)d; }
// CUDA's __hmax/__hmin: NaN-ignoring (the other operand), +0 > -0.
static inline half __hmax(half a, half b) { return (half)fmaxf((float)a, (float)b); }
static inline half __hmin(half a, half b) { return (half)fminf((float)a, (float)b); }
static inline bool __hisnan(half a) { return a != a; }

struct nv_bfloat16 {
  unsigned short __x;
  nv_bfloat16() = default;
  static unsigned short from_float(float f) {  // round to nearest even, as __float2bfloat16_rn
    unsigned u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x0040u);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
  }
  nv_bfloat16(float f) : __x(from_float(f)) {}
  nv_bfloat16(double d) : __x(from_float((float)d)) {}
  nv_bfloat16(int i) : __x(from_float((float)i)) {}
  nv_bfloat16(unsigned i) : __x(from_float((float)i)) {}
  nv_bfloat16(long long i) : __x(from_float((float)i)) {}
  nv_bfloat16(unsigned long long i) : __x(from_float((float)i)) {}
  nv_bfloat16(short i) : __x(from_float((float)i)) {}
  nv_bfloat16(unsigned short i) : __x(from_float((float)i)) {}
  operator float() const {
    unsigned u = (unsigned)__x << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
};
typedef nv_bfloat16 __nv_bfloat16;
static inline nv_bfloat16 operator+(nv_bfloat16 a, nv_bfloat16 b) { return nv_bfloat16((float)a + (float)b); }
static inline nv_bfloat16 operator-(nv_bfloat16 a, nv_bfloat16 b) { return nv_bfloat16((float)a - (float)b); }
static inline nv_bfloat16 operator*(nv_bfloat16 a, nv_bfloat16 b) { return nv_bfloat16((float)a * (float)b); }
static inline nv_bfloat16 operator/(nv_bfloat16 a, nv_bfloat16 b) { return nv_bfloat16((float)a / (float)b); }
static inline nv_bfloat16 operator-(nv_bfloat16 a) { nv_bfloat16 r = a; r.__x ^= 0x8000u; return r; }
static inline nv_bfloat16& operator+=(nv_bfloat16& a, nv_bfloat16 b) { return a = a + b; }
static inline nv_bfloat16& operator-=(nv_bfloat16& a, nv_bfloat16 b) { return a = a - b; }
static inline nv_bfloat16& operator*=(nv_bfloat16& a, nv_bfloat16 b) { return a = a * b; }
static inline nv_bfloat16& operator/=(nv_bfloat16& a, nv_bfloat16 b) { return a = a / b; }
static inline bool operator==(nv_bfloat16 a, nv_bfloat16 b) { return (float)a == (float)b; }
static inline bool operator!=(nv_bfloat16 a, nv_bfloat16 b) { return (float)a != (float)b; }
static inline bool operator<(nv_bfloat16 a, nv_bfloat16 b) { return (float)a < (float)b; }
static inline bool operator<=(nv_bfloat16 a, nv_bfloat16 b) { return (float)a <= (float)b; }
static inline bool operator>(nv_bfloat16 a, nv_bfloat16 b) { return (float)a > (float)b; }
static inline bool operator>=(nv_bfloat16 a, nv_bfloat16 b) { return (float)a >= (float)b; }
static inline nv_bfloat16 __float2bfloat16_rn(float f) { return nv_bfloat16(f); }
static inline nv_bfloat16 __float2bfloat16(float f) { return nv_bfloat16(f); }
static inline float __bfloat162float(nv_bfloat16 b) { return (float)b; }
static inline nv_bfloat16 __hmax(nv_bfloat16 a, nv_bfloat16 b) { return nv_bfloat16(fmaxf((float)a, (float)b)); }
static inline nv_bfloat16 __hmin(nv_bfloat16 a, nv_bfloat16 b) { return nv_bfloat16(fminf((float)a, (float)b)); }
static inline bool __hisnan(nv_bfloat16 a) { float f = a; return f != f; }

// ----------------------------------------------------------------------------- vector types

#define TVMS_EMU_VEC2(name, T, A) \
  struct __attribute__((aligned(A))) name { T x, y; }; \
  static inline name make_##name(T x, T y) { name r; r.x = x; r.y = y; return r; }
#define TVMS_EMU_VEC4(name, T, A) \
  struct __attribute__((aligned(A))) name { T x, y, z, w; }; \
  static inline name make_##name(T x, T y, T z, T w) { name r; r.x = x; r.y = y; r.z = z; r.w = w; return r; }
TVMS_EMU_VEC2(float2, float, 8)
TVMS_EMU_VEC4(float4, float, 16)
TVMS_EMU_VEC2(double2, double, 16)
TVMS_EMU_VEC2(int2, int, 8)
TVMS_EMU_VEC4(int4, int, 16)
TVMS_EMU_VEC2(uint2, unsigned, 8)
TVMS_EMU_VEC4(uint4, unsigned, 16)
TVMS_EMU_VEC2(longlong2, long long, 16)
TVMS_EMU_VEC2(ulonglong2, unsigned long long, 16)
TVMS_EMU_VEC4(char4, signed char, 4)
TVMS_EMU_VEC4(uchar4, unsigned char, 4)
TVMS_EMU_VEC2(short2, short, 4)
TVMS_EMU_VEC2(ushort2, unsigned short, 4)
TVMS_EMU_VEC2(half2, half, 4)
TVMS_EMU_VEC2(nv_bfloat162, nv_bfloat16, 4)
typedef half2 __half2;
typedef nv_bfloat162 __nv_bfloat162;
#undef TVMS_EMU_VEC2
#undef TVMS_EMU_VEC4

// ----------------------------------------------------------------------------- math

// CUDA's max/min overloads (math_functions.hpp); float ones are fmaxf/fminf (NaN-ignoring).
static inline int max(int a, int b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
static inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
static inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
static inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
static inline long max(long a, long b) { return a > b ? a : b; }
static inline long min(long a, long b) { return a < b ? a : b; }
static inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
static inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long max(long long a, unsigned long long b) { return max((unsigned long long)a, b); }
static inline unsigned long long min(long long a, unsigned long long b) { return min((unsigned long long)a, b); }
static inline unsigned long long max(unsigned long long a, long long b) { return max(a, (unsigned long long)b); }
static inline unsigned long long min(unsigned long long a, long long b) { return min(a, (unsigned long long)b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline float min(float a, float b) { return fminf(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(float a, double b) { return fmax((double)a, b); }
static inline double min(float a, double b) { return fmin((double)a, b); }
static inline double max(double a, float b) { return fmax(a, (double)b); }
static inline double min(double a, float b) { return fmin(a, (double)b); }

// atomicCAS: the generated bounds checks record the first failure with it (a thread's fibers
// of one block run one at a time, but blocks may not: a real compare-and-swap).
static inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare,
                                           unsigned long long val) {
  __atomic_compare_exchange_n(address, &compare, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;
}

static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
static inline long long __double_as_longlong(double d) { long long i; memcpy(&i, &d, 8); return i; }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
// Fast-math intrinsics a call_extern may name, computed precisely (glibc declares __expf, __logf,
// __log2f, __sinf, __cosf, __tanf and __powf itself).
static inline float __fdividef(float x, float y) { return x / y; }
static inline float fdividef(float x, float y) { return x / y; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __saturatef(float x) { return x != x ? 0.0f : fminf(fmaxf(x, 0.0f), 1.0f); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752); }

// ----------------------------------------------------------------------------- the block scheduler

namespace tvms_emu {

enum State { RUNNABLE = 0, AT_BARRIER = 1, AT_SHUFFLE = 2, DONE = 3 };

struct Fiber {
  ucontext_t ctx;       // to start it (makecontext)
  jmp_buf jb;           // where it yielded: switches are _setjmp/_longjmp, which make no system call
  bool started;
  State state;
  unsigned tx, ty, tz, lid;
  int site;             // source line of the barrier / shuffle it waits at
  unsigned mask;        // its shuffle's mask
  unsigned long long epoch;  // the shuffle release it took part in last
};

static const unsigned kMaxThreads = 1024;
static const size_t kSlotBytes = 16;
static const size_t kGuardBytes = 4096;
static const int kMaxErrors = 8;
static const unsigned long long kCanary = 0x7476'6d73'6361'6e61ULL;

// The fibers' stacks: one region per process (tvms_emu__alloc_stacks), which every module
// compiled by tests/support/cuda_emulator.py uses in turn (tvms_emu__use_stacks; launches are serialized).
TVMS_EMU_STATE char* stack_base TVMS_EMU_INIT(= nullptr);
TVMS_EMU_STATE size_t stack_bytes TVMS_EMU_INIT(= 0);

TVMS_EMU_STATE Fiber fibers[kMaxThreads];
TVMS_EMU_STATE unsigned nthreads TVMS_EMU_INIT(= 0);
TVMS_EMU_STATE unsigned long long launch_serial TVMS_EMU_INIT(= 0);  // launches so far (per-launch state's key)
TVMS_EMU_STATE Fiber* cur TVMS_EMU_INIT(= nullptr);
TVMS_EMU_STATE ucontext_t sched_ctx;
TVMS_EMU_STATE jmp_buf sched_jb;
TVMS_EMU_STATE void (*body_fn)(void**) TVMS_EMU_INIT(= nullptr);
TVMS_EMU_STATE void** body_args TVMS_EMU_INIT(= nullptr);
TVMS_EMU_STATE unsigned char slots[kMaxThreads * kSlotBytes];  // a shuffle's value per thread, as written
TVMS_EMU_STATE unsigned char snap[kMaxThreads * kSlotBytes];   // the same, copied when the shuffle opens
TVMS_EMU_STATE unsigned long long epoch_counter TVMS_EMU_INIT(= 0);
TVMS_EMU_STATE std::mutex launch_mutex;

TVMS_EMU_STATE char errors[kMaxErrors][768];
TVMS_EMU_STATE int nerrors TVMS_EMU_INIT(= 0);
TVMS_EMU_STATE int nerrors_total TVMS_EMU_INIT(= 0);

static inline void error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void error(const char* fmt, ...) {
  nerrors_total++;
  if (nerrors >= kMaxErrors) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(errors[nerrors], sizeof errors[0], fmt, ap);
  va_end(ap);
  nerrors++;
}

static inline void where(char* buf, size_t n) {
  if (cur)
    snprintf(buf, n, "block (%u, %u, %u), thread (%u, %u, %u)", blockIdx.x, blockIdx.y, blockIdx.z, cur->tx, cur->ty,
             cur->tz);
  else
    snprintf(buf, n, "outside a kernel");
}

static inline char* stack_of(unsigned i) { return stack_base + (size_t)i * stack_bytes; }

static inline void yield() {
  if (!_setjmp(cur->jb)) _longjmp(sched_jb, 1);
}

#ifndef TVMS_EMU_KERNELS
// cuda_emulator_ptx.h: a block's threads start with no cp.async pending; the copies still
// pending when the block ends are performed then.
static void ptx_block_start();
static void ptx_block_end();

// A fiber runs the kernel once per block, and waits (DONE) for the next block in between.
static void fiber_main() {
  for (;;) {
    body_fn(body_args);
    cur->state = DONE;
    yield();
  }
}

static __attribute__((noinline)) void resume(Fiber* f) {
  cur = f;
  threadIdx.x = f->tx;
  threadIdx.y = f->ty;
  threadIdx.z = f->tz;
  if (!_setjmp(sched_jb)) {
    if (f->started) _longjmp(f->jb, 1);
    f->started = true;
    char* stack = stack_of(f->lid) + kGuardBytes;
    memcpy(stack, &kCanary, sizeof kCanary);
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = stack;
    f->ctx.uc_stack.ss_size = stack_bytes - kGuardBytes;
    f->ctx.uc_link = nullptr;
    makecontext(&f->ctx, fiber_main, 0);
    swapcontext(&sched_ctx, &f->ctx);  // returns only by the _longjmp above
  }
}
#endif  // TVMS_EMU_KERNELS

static inline void syncthreads(int line) {
  cur->state = AT_BARRIER;
  cur->site = line;
  yield();
}

enum ShuffleKind { SHFL_XOR, SHFL_IDX, SHFL_UP, SHFL_DOWN, SYNCWARP };
static const char* const kShuffleNames[] = {"__shfl_xor_sync", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                                            "__syncwarp"};

// Every lane named by `mask` arrives (yield) with its value, the shuffle opens (open_shuffle),
// then each lane reads the value its source lane had.
template <typename T>
static inline T shuffle(int line, ShuffleKind kind, unsigned mask, T var, int arg, int width) {
  static_assert(sizeof(T) <= kSlotBytes && std::is_trivially_copyable<T>::value, "shuffle of an unsupported type");
  Fiber* self = cur;
  memcpy(slots + (size_t)self->lid * kSlotBytes, &var, sizeof(T));
  self->state = AT_SHUFFLE;
  self->site = line;
  self->mask = mask;
  yield();
  if (kind == SYNCWARP) return var;
  unsigned lane = self->lid & 31u, warp_base = self->lid & ~31u;
  if (width <= 0 || width > 32 || (width & (width - 1))) {
    char w[128];
    where(w, sizeof w);
    error("line %d: %s with width %d (%s): width must be a power of 2 up to 32", line, kShuffleNames[kind], width, w);
    return var;
  }
  unsigned w = (unsigned)width, first = lane & ~(w - 1), src;
  switch (kind) {
    case SHFL_XOR:  // a lane may read its own or an earlier group of `width`; a later one gives its own value
      src = (lane ^ (unsigned)arg) & 31u;
      if ((src & ~(w - 1)) > first) return var;
      break;
    case SHFL_IDX:
      src = first + ((unsigned)arg & (w - 1));
      break;
    case SHFL_UP:
      if ((int)(lane - first) - arg < 0) return var;
      src = lane - (unsigned)arg;
      break;
    default:  // SHFL_DOWN
      if (lane - first + (unsigned)arg >= w) return var;
      src = lane + (unsigned)arg;
      break;
  }
  unsigned src_lid = warp_base + src;
  if (src_lid >= nthreads || fibers[src_lid].epoch != self->epoch) {
    char wh[128];
    where(wh, sizeof wh);
    error("line %d: %s(0x%08x, ..., %d, %d) in %s reads lane %u, which does not take part in it", line,
          kShuffleNames[kind], mask, arg, width, wh, src);
    return var;
  }
  T out;
  memcpy(&out, snap + (size_t)src_lid * kSlotBytes, sizeof(T));
  return out;
}

static inline void syncwarp(int line, unsigned mask = 0xffffffffu) { shuffle(line, SYNCWARP, mask, 0, 0, 32); }

#ifndef TVMS_EMU_KERNELS
static void restart_fibers() {
  for (unsigned i = 0; i < kMaxThreads; ++i) fibers[i].started = false;
}

static void describe_states(char* out, size_t n) {
  size_t used = 0;
  int shown = 0;
  for (unsigned i = 0; i < nthreads && shown < 6; ++i) {
    Fiber& f = fibers[i];
    if (f.state == DONE) continue;
    const char* what = f.state == AT_BARRIER ? "__syncthreads" : "a warp shuffle";
    int k = snprintf(out + used, n - used, "%sthread (%u, %u, %u) at %s on line %d", shown ? "; " : "", f.tx, f.ty,
                     f.tz, what, f.site);
    if (k < 0 || (size_t)k >= n - used) break;
    used += (size_t)k;
    shown++;
  }
}

// Open the shuffle of the warp starting at thread `base` if its lanes have all arrived; false
// on an error (reported).
static bool open_shuffle(unsigned base, bool* opened) {
  {
    unsigned end = base + 32 < nthreads ? base + 32 : nthreads;
    unsigned arrived = 0, mask = 0;
    bool any = false;
    int site = 0;
    for (unsigned i = base; i < end; ++i) {
      Fiber& f = fibers[i];
      if (f.state != AT_SHUFFLE) continue;
      if (!any) {
        mask = f.mask;
        site = f.site;
        any = true;
      } else if (f.mask != mask) {
        error("line %d: threads of warp %u of block (%u, %u, %u) shuffle with different masks (0x%08x, 0x%08x)", f.site,
              base / 32, blockIdx.x, blockIdx.y, blockIdx.z, mask, f.mask);
        return false;
      } else if (f.site != site) {
        error("threads of warp %u of block (%u, %u, %u) wait at different shuffles (lines %d and %d)", base / 32,
              blockIdx.x, blockIdx.y, blockIdx.z, site, f.site);
        return false;
      }
      arrived |= 1u << (i - base);
    }
    if (!any) return true;
    if ((arrived & ~mask) != 0) {
      unsigned lane = __builtin_ctz(arrived & ~mask);
      Fiber& f = fibers[base + lane];
      error("line %d: thread (%u, %u, %u) of block (%u, %u, %u) shuffles with mask 0x%08x, which does not name its "
            "lane %u", f.site, f.tx, f.ty, f.tz, blockIdx.x, blockIdx.y, blockIdx.z, mask, lane);
      return false;
    }
    if (mask & ~arrived) {
      unsigned lane = __builtin_ctz(mask & ~arrived);
      unsigned lid = base + lane;
      const char* why = lid >= nthreads ? "does not exist (the block is smaller)"
                        : fibers[lid].state == DONE ? "has returned"
                                                    : "waits at __syncthreads";
      char msg[160];
      if (lid < nthreads && fibers[lid].state == AT_BARRIER)
        snprintf(msg, sizeof msg, " (line %d)", fibers[lid].site);
      else
        msg[0] = 0;
      error("line %d: warp shuffle (0x%08x, ...) in warp %u of block (%u, %u, %u): lane %u, named by the mask, %s%s",
            site, mask, base / 32, blockIdx.x, blockIdx.y, blockIdx.z, lane, why, msg);
      return false;
    }
    unsigned long long e = ++epoch_counter;
    for (unsigned i = base; i < end; ++i) {
      Fiber& f = fibers[i];
      if (f.state != AT_SHUFFLE) continue;
      memcpy(snap + (size_t)i * kSlotBytes, slots + (size_t)i * kSlotBytes, kSlotBytes);
      f.epoch = e;
      f.state = RUNNABLE;
      *opened = true;
    }
  }
  return true;
}
#endif  // TVMS_EMU_KERNELS

}  // namespace tvms_emu
#include "cuda_emulator_counters.h"
namespace tvms_emu {

extern "C" char __start_tvms_shared[];
extern "C" char __stop_tvms_shared[];
// Makes the section exist when the kernels declare no shared array.
static __attribute__((section("tvms_shared"), used)) char shared_anchor[16];

static const size_t kDynSmemCapacity = 256 * 1024;
static const size_t kDynSmemGuard = 4096;
TVMS_EMU_STATE __attribute__((aligned(128))) unsigned char dyn_smem[kDynSmemCapacity + kDynSmemGuard];
TVMS_EMU_STATE size_t dyn_smem_bytes TVMS_EMU_INIT(= 0);
TVMS_EMU_STATE bool reverse_odd_blocks TVMS_EMU_INIT(= true);
TVMS_EMU_STATE bool poison_shared TVMS_EMU_INIT(= true);
TVMS_EMU_STATE bool eager_copies TVMS_EMU_INIT(= false);  // cp.async performed when issued (cuda_emulator_ptx.h)

#ifndef TVMS_EMU_KERNELS
// Runs one block; false when the launch must stop (an error that leaves threads stuck).
static bool run_block(bool reverse) {
  for (unsigned i = 0; i < nthreads; ++i) {
    Fiber& f = fibers[i];
    f.state = RUNNABLE;
    f.lid = i;
    f.tx = i % blockDim.x;
    f.ty = (i / blockDim.x) % blockDim.y;
    f.tz = i / (blockDim.x * blockDim.y);
    f.site = 0;
    f.epoch = 0;
  }
  ptx_block_start();
  const unsigned nwarps = (nthreads + 31) / 32;
  for (;;) {
    // Each warp in turn runs as far as it can (through its shuffles and wmma operations) before
    // the next starts: warps of a real block drift apart, so a missing __syncthreads between
    // one warp's writes of shared memory and another's reads shows up here.
    for (unsigned w = 0; w < nwarps; ++w) {
      unsigned base = (reverse ? nwarps - 1 - w : w) * 32;
      for (;;) {
        for (unsigned k = 0; k < 32; ++k) {
          unsigned i = base + (reverse ? 31 - k : k);
          if (i >= nthreads || fibers[i].state != RUNNABLE) continue;
          resume(&fibers[i]);
        }
        cur = nullptr;
        if (counters::enabled) counters::flush(base);
        bool opened = false;
        if (!open_shuffle(base, &opened)) return false;
        if (!opened) break;
      }
    }
    unsigned done = 0, at_barrier = 0;
    for (unsigned i = 0; i < nthreads; ++i) {
      done += fibers[i].state == DONE;
      at_barrier += fibers[i].state == AT_BARRIER;
    }
    if (done == nthreads) {
      ptx_block_end();
      return true;
    }
    if (done + at_barrier == nthreads) {
      int site = -1;
      for (unsigned i = 0; i < nthreads; ++i) {
        Fiber& f = fibers[i];
        if (f.state != AT_BARRIER) continue;
        if (site < 0) {
          site = f.site;
        } else if (f.site != site) {
          unsigned j = 0;
          while (fibers[j].state != AT_BARRIER) ++j;
          error("divergent __syncthreads in block (%u, %u, %u): thread (%u, %u, %u) waits at line %d, thread "
                "(%u, %u, %u) at line %d", blockIdx.x, blockIdx.y, blockIdx.z, fibers[j].tx, fibers[j].ty,
                fibers[j].tz, fibers[j].site, f.tx, f.ty, f.tz, f.site);
          return false;
        }
      }
      for (unsigned i = 0; i < nthreads; ++i)
        if (fibers[i].state == AT_BARRIER) fibers[i].state = RUNNABLE;
      continue;
    }
    char states[600];
    describe_states(states, sizeof states);
    error("deadlock in block (%u, %u, %u): %s", blockIdx.x, blockIdx.y, blockIdx.z, states);
    return false;
  }
}

static void poison() {
  if (!poison_shared) return;
  memset(__start_tvms_shared, 0xff, (size_t)(__stop_tvms_shared - __start_tvms_shared));
  memset(dyn_smem, 0xff, dyn_smem_bytes + kDynSmemGuard);
}

TVMS_EMU_FN void launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, void** args,
                   void (*fn)(void**)) {
  std::lock_guard<std::mutex> guard(launch_mutex);
  ++launch_serial;
  nerrors = 0;
  nerrors_total = 0;
  unsigned long long n = (unsigned long long)bx * by * bz;
  if (n == 0 || n > 1024 || gx == 0 || gy == 0 || gz == 0) {
    error("invalid launch configuration: grid (%u, %u, %u), block (%u, %u, %u)", gx, gy, gz, bx, by, bz);
    return;
  }
  if (dyn_smem_bytes > kDynSmemCapacity) {
    error("the launch asks for %zu bytes of dynamic shared memory; the emulator has %zu", dyn_smem_bytes,
          kDynSmemCapacity);
    return;
  }
  if (!stack_base) {
    error("no fiber stacks: call tvms_emu__use_stacks first");
    return;
  }
  nthreads = (unsigned)n;
  blockDim = dim3(bx, by, bz);
  gridDim = dim3(gx, gy, gz);
  body_fn = fn;
  body_args = args;
  counters::begin_launch();
  unsigned long long b = 0;
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x, ++b) {
        if (counters::skip_block(b)) continue;
        counters::totals[counters::BLOCKS_RUN]++;
        blockIdx.x = x;
        blockIdx.y = y;
        blockIdx.z = z;
        poison();
        bool ok = run_block(reverse_odd_blocks && (b & 1));
        for (unsigned i = 0; i < nthreads && ok; ++i)
          if (memcmp(stack_of(i) + kGuardBytes, &kCanary, sizeof kCanary) != 0) {
            error("the stack of thread %u overflowed (%zu bytes)", i, stack_bytes - kGuardBytes);
            ok = false;
          }
        if (!ok) restart_fibers();  // threads left inside the kernel start afresh next time
        // bytes past the launch's dynamic shared memory must be left alone
        if (ok && poison_shared) {
          for (size_t i = dyn_smem_bytes; i < dyn_smem_bytes + kDynSmemGuard; ++i)
            if (dyn_smem[i] != 0xff) {
              error("block (%u, %u, %u) wrote dynamic shared memory at byte %zu, past the %zu bytes of the launch", x,
                    y, z, i, dyn_smem_bytes);
              ok = false;
              break;
            }
        }
        if (!ok || nerrors_total) return;  // the first block with a problem is enough
      }
}
#else
TVMS_EMU_FN void launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, void** args,
                        void (*fn)(void**));
#endif  // TVMS_EMU_KERNELS

// UBSan handlers (-fsanitize=bounds,alignment), defined here so that no sanitizer runtime is needed.
struct SourceLocation { const char* file; unsigned line, column; };
struct TypeDescriptor { unsigned short kind, info; char name[1]; };
struct OutOfBoundsData { SourceLocation loc; const TypeDescriptor* array_type; const TypeDescriptor* index_type; };
struct TypeMismatchData { SourceLocation loc; const TypeDescriptor* type; unsigned char log_alignment, check_kind; };

}  // namespace tvms_emu

// `extern __shared__ T name[];` in a kernel becomes `T* const name = (T*)tvms_emu__dynamic_smem;`.
static unsigned char* const tvms_emu__dynamic_smem = tvms_emu::dyn_smem;

#ifndef TVMS_EMU_KERNELS
extern "C" {
__attribute__((visibility("default"))) int tvms_emu__errors(char* out, int n) {
  using namespace tvms_emu;
  int used = 0;
  if (n > 0) out[0] = 0;
  for (int i = 0; i < nerrors && used < n - 1; ++i) {
    int k = snprintf(out + used, (size_t)(n - used), "%s\n", errors[i]);
    if (k < 0) break;
    used += k;
  }
  return nerrors_total;
}
// The stack region all modules share: `count` stacks of `bytes` bytes, each with a guard page
// at its bottom; never freed.
__attribute__((visibility("default"))) void* tvms_emu__alloc_stacks(unsigned count, unsigned long long bytes) {
  void* p = mmap(nullptr, (size_t)count * bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return nullptr;
  for (unsigned i = 0; i < count; ++i) mprotect((char*)p + (size_t)i * bytes, tvms_emu::kGuardBytes, PROT_NONE);
  return p;
}
// Take the stacks (another module may have used them since): every fiber starts afresh.
__attribute__((visibility("default"))) void tvms_emu__use_stacks(void* base, unsigned long long bytes) {
  tvms_emu::stack_base = (char*)base;
  tvms_emu::stack_bytes = (size_t)bytes;
  tvms_emu::restart_fibers();
}
__attribute__((visibility("default"))) void tvms_emu__configure(unsigned long long dyn_smem_bytes, int reverse_odd_blocks,
                                                                int poison_shared, int eager_copies) {
  tvms_emu::dyn_smem_bytes = (size_t)dyn_smem_bytes;
  tvms_emu::reverse_odd_blocks = reverse_odd_blocks != 0;
  tvms_emu::poison_shared = poison_shared != 0;
  tvms_emu::eager_copies = eager_copies != 0;
}

__attribute__((visibility("hidden"))) void __ubsan_handle_out_of_bounds(tvms_emu::OutOfBoundsData* d, void* index) {
  char w[128];
  tvms_emu::where(w, sizeof w);
  long long i = (long long)(intptr_t)index;
  tvms_emu::error("line %u: index %lld is out of bounds for type %s (%s)", d->loc.line, i, d->array_type->name, w);
}
__attribute__((visibility("hidden"))) void __ubsan_handle_out_of_bounds_abort(tvms_emu::OutOfBoundsData* d, void* index) {
  __ubsan_handle_out_of_bounds(d, index);
}
__attribute__((visibility("hidden"))) void __ubsan_handle_type_mismatch_v1(tvms_emu::TypeMismatchData* d, void* ptr) {
  char w[128];
  tvms_emu::where(w, sizeof w);
  if (!ptr) {
    tvms_emu::error("line %u: access through a null pointer of type %s (%s)", d->loc.line, d->type->name, w);
    return;
  }
  tvms_emu::error("line %u: address %p is not aligned to %u bytes for an access of type %s (%s)", d->loc.line, ptr,
                  1u << d->log_alignment, d->type->name, w);
}
__attribute__((visibility("hidden"))) void __ubsan_handle_type_mismatch_v1_abort(tvms_emu::TypeMismatchData* d, void* ptr) {
  __ubsan_handle_type_mismatch_v1(d, ptr);
}
}
#endif  // TVMS_EMU_KERNELS

#define __syncthreads() ::tvms_emu::syncthreads(__LINE__)
namespace tvms_emu {
template <typename T>
static inline T shfl_call(int line, ShuffleKind kind, unsigned mask, T var, int arg, int width = 32) {
  return shuffle(line, kind, mask, var, arg, width);
}
}  // namespace tvms_emu
#define __shfl_xor_sync(mask, ...) ::tvms_emu::shfl_call(__LINE__, ::tvms_emu::SHFL_XOR, (unsigned)(mask), __VA_ARGS__)
#define __shfl_sync(mask, ...) ::tvms_emu::shfl_call(__LINE__, ::tvms_emu::SHFL_IDX, (unsigned)(mask), __VA_ARGS__)
#define __shfl_up_sync(mask, ...) ::tvms_emu::shfl_call(__LINE__, ::tvms_emu::SHFL_UP, (unsigned)(mask), __VA_ARGS__)
#define __shfl_down_sync(mask, ...) ::tvms_emu::shfl_call(__LINE__, ::tvms_emu::SHFL_DOWN, (unsigned)(mask), __VA_ARGS__)
#define __syncwarp(...) ::tvms_emu::syncwarp(__LINE__ __VA_OPT__(, ) __VA_ARGS__)

// ---- tensor cores: nvcuda::wmma (mma.h)
// A fragment is a warp's register tile; its layout across the lanes is unspecified, so here
// every lane holds the whole tile and every operation is done by each lane alike. Each one is
// warp-collective: all 32 lanes of the warp must reach it together (checked as a __syncwarp
// with a full mask is: a lane missing is an error). Products accumulate in float, as the
// tensor cores do for half and bfloat16 inputs.
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

// The pointer must be 256-bit aligned and the leading dimension a multiple of 16 bytes.
static inline void check_tile(int line, const char* what, const void* p, unsigned ldm, size_t elem) {
  if (::tvms_emu::cur->lid % 32) return;  // the lanes pass the same arguments: one report per warp
  char w[128];
  if ((uintptr_t)p % 32) {
    ::tvms_emu::where(w, sizeof w);
    ::tvms_emu::error("line %d: %s at address %p, which is not 32-byte aligned (%s)", line, what, p, w);
  } else if ((ldm * elem) % 16) {
    ::tvms_emu::where(w, sizeof w);
    ::tvms_emu::error("line %d: %s with a leading dimension of %u elements, not a multiple of 16 bytes (%s)", line,
                      what, ldm, w);
  }
}

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
  static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
  static constexpr int num_elements = rows * cols;
  T x[rows * cols];
};

template <typename Use, int M, int N, int K, typename T, typename L, typename V>
static inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, const V& value, int line = __builtin_LINE()) {
  ::tvms_emu::syncwarp(line);
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = (T)value;
}

template <typename Use, int M, int N, int K, typename T, typename L>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const T* p, unsigned ldm,
                                    int line = __builtin_LINE()) {
  static_assert(!std::is_same<Use, accumulator>::value, "an accumulator load takes a layout_t");
  ::tvms_emu::syncwarp(line);
  check_tile(line, "wmma::load_matrix_sync", p, ldm, sizeof(T));
  constexpr bool col = std::is_same<L, col_major>::value;
  for (int r = 0; r < f.rows; ++r)
    for (int c = 0; c < f.cols; ++c) f.x[r * f.cols + c] = col ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c];
}

template <int M, int N, int K, typename T>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, T, void>& f, const T* p, unsigned ldm, layout_t layout,
                                    int line = __builtin_LINE()) {
  ::tvms_emu::syncwarp(line);
  check_tile(line, "wmma::load_matrix_sync", p, ldm, sizeof(T));
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c)
      f.x[r * N + c] = layout == mem_col_major ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c];
}

template <int M, int N, int K, typename T>
static inline void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T, void>& f, unsigned ldm,
                                     layout_t layout, int line = __builtin_LINE()) {
  ::tvms_emu::syncwarp(line);
  check_tile(line, "wmma::store_matrix_sync", p, ldm, sizeof(T));
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) {
      T* q = layout == mem_col_major ? p + (size_t)c * ldm + r : p + (size_t)r * ldm + c;
      *q = f.x[r * N + c];
    }
  ::tvms_emu::syncwarp(line);  // every lane wrote the same tile: none reads it back before all have
}

template <int M, int N, int K, typename TA, typename LA, typename TB, typename LB, typename TC, typename TD>
static inline void mma_sync(fragment<accumulator, M, N, K, TD, void>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                            const fragment<matrix_b, M, N, K, TB, LB>& b,
                            const fragment<accumulator, M, N, K, TC, void>& c, int line = __builtin_LINE()) {
  ::tvms_emu::syncwarp(line);
  // The lanes of a warp hold the same fragments: the first lane to run computes the product,
  // the others of the same warp-wide call (the same release epoch) take it.
  static_assert(M * N <= 256, "fragment shape");
  static unsigned long long memo_epoch[32];
  static TD memo[32][256];
  unsigned warp = ::tvms_emu::cur->lid / 32;
  if (memo_epoch[warp] != ::tvms_emu::cur->epoch) {
    memo_epoch[warp] = ::tvms_emu::cur->epoch;
    float fa[M * K], fb[K * N], out[M * N];  // converted once: half to float is a call per element
    for (int i = 0; i < M * K; ++i) fa[i] = (float)a.x[i];
    for (int i = 0; i < K * N; ++i) fb[i] = (float)b.x[i];
    for (int i = 0; i < M * N; ++i) out[i] = (float)c.x[i];
    for (int i = 0; i < M; ++i)
      for (int k = 0; k < K; ++k)
        for (int j = 0; j < N; ++j) out[i * N + j] += fa[i * K + k] * fb[k * N + j];
    for (int i = 0; i < M * N; ++i) memo[warp][i] = (TD)out[i];
  }
  memcpy(d.x, memo[warp], sizeof(TD) * M * N);
}
}  // namespace wmma
}  // namespace nvcuda

#include "cuda_emulator_ptx.h"

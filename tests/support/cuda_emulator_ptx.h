// CPU stand-ins for the helpers compiler/codegen_cuda/ptx.py prints for PTX's ldmatrix, mma.sync
// and cp.async (TVM's ptx_* builtins): generated code defines them with inline PTX only when
// TVMS_CUDA_EMULATOR is not defined, and the shim defines it. Included at the end of
// cuda_emulator_shim.h, so everything of the block scheduler is in scope.
//
// What is emulated, and checked (errors read with tvms_emu__errors(), as the shim's):
//
// - ldmatrix (tvms_ldmatrix_x{1,2,4}[_trans]) and mma.sync (tvms_mma_*) are warp-collective:
//   all 32 lanes of the warp must reach the same call (a __syncwarp with a full mask, whose
//   checks report a lane missing, exited or elsewhere). Each lane puts what it contributes (its
//   row address; its A and B registers) in a per-warp exchange area, a __syncwarp, each lane
//   computes its own registers from what all lanes gave, per the PTX ISA's fragment layouts, and
//   a second __syncwarp keeps the area until every lane has read it.
// - ldmatrix: lanes 8j..8j+7 give the rows of matrix j (x1: lanes 0-7, x2: 0-15; the other
//   lanes' addresses are ignored); lane L receives, per matrix j, register j = the two 16-bit
//   elements at row L/4, columns 2*(L%4) and +1 (.trans: rows 2*(L%4) and +1, column L/4).
//   Each address it uses must be 16-byte aligned and its 16 bytes in shared memory (static or
//   dynamic), else an error.
// - mma.sync m16n8k16 (f16 or bf16 inputs, f32 or f16 accumulators) and m16n8k8 (tf32 inputs,
//   f32): D = A * B + C with D the C registers. Products are summed in float, in k order, onto
//   C. tf32 inputs are first rounded from fp32 to 10 mantissa bits, to nearest with ties away
//   from zero (cvt.rna.tf32.f32, which the GPU helpers apply too). The f16-accumulator form adds
//   the products of the whole k-step (16) to C in float and rounds the sum to half once, where
//   the tensor core's own intermediate rounding is unspecified: results may differ from a GPU's
//   by an ulp of half.
// - cp.async (tvms_cp_async{4,8,16}[_zfill]): a copy is recorded, not performed, when issued;
//   commit_group closes the thread's open copies into a group; wait_group<N> performs, in issue
//   order, the copies of all committed groups but the N most recent. Copies not yet committed
//   are not waited on (as in PTX). So a thread that reads shared memory before the wait that
//   covers a copy reads what was there before (0xff bytes, if nothing wrote it since the block
//   started), as a GPU may. Copies still pending when their thread returns are performed when
//   the whole block has ended: a GPU completes them too, at the latest then, so no other thread
//   of the block may count on seeing them (performing them at the thread's return would show
//   them to threads still running, and hide a missing wait). A false predicate (_zfill) writes
//   zeros and reads nothing. The destination must be in shared memory and both addresses
//   aligned to the copy's size, else an error. With `eager_copies` (EmulatedModule's
//   ``eager_copies=True``) a copy is performed when issued instead, the earliest a GPU may:
//   what shows a copy overwriting shared memory something asynchronous still reads (a wgmma
//   not yet waited for).

// - wgmma (tvms_wgmma_m64n{N}k16_* and, TF32, _k8_*: Hopper's warpgroup MMA; tvms_wgmma_desc builds its shared
//   memory descriptors): each of the warpgroup's 128 threads (128 consecutive linear thread ids)
//   computes its own accumulator elements, D += A * B. Asynchronously, as on the GPU: a wgmma
//   is recorded when issued, wgmma.commit_group closes the thread's open ones into a group, and
//   wgmma.wait_group N performs every committed group but the N most recent, reading shared
//   memory then; so registers read before the wait that covers their wgmma hold what they held
//   before (wgmma.fence and fence.proxy.async do nothing here). The operand elements a thread
//   reads are digested when it issues the wgmma and again when it is performed: a change in
//   between (shared memory overwritten while a GPU may still be reading it) is an error. A
//   thread of a later block finding groups left unwaited reports it. The
//   operands are read from dynamic shared memory through the descriptors as the tensor cores
//   read a 128-byte-swizzled tile (the only swizzle tvms uses; any other is an error), with the
//   descriptor's address taken relative to the dynamic shared memory's start, which the GPU
//   code aligns to 1024 bytes: element (mn, k) of a K-major operand (trans 0) is at byte
//   start + (mn / 8) * SBO + (mn % 8) * 128 + k * (its size: 2, or 4 for tf32), of an MN-major
//   one (trans 1, 16-bit types only) at
//   start + (mn / 64) * LBO + 2 (mn % 64) + (k / 8) * SBO + (k % 8) * 128; the address's bits
//   4-6 are then XORed with its bits 7-9. Thread t (warp w = t / 32, lane l) holds, in float
//   element i, row 16w + l/4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (l % 4) + i % 2 (f16
//   accumulators: elements 2r and 2r + 1 in register r, low half first), as the PTX ISA's
//   "Register Fragments and Shared Memory Matrix Layouts" for wgmma's D say. Products are summed
//   in float in k order and added to D (rounded to half once for f16 accumulators). A tf32
//   operand is the float in shared memory with its low 13 bits dropped (the tensor cores read
//   the top 19 bits; nothing rounds it first, unlike mma.sync's cvt.rna).

#pragma once

#include <deque>
#include <vector>

namespace tvms_emu {
namespace ptx {

// Whether [p, p + n) lies in shared memory: a static __shared__ array or the launch's dynamic
// shared memory.
static inline bool in_shared(const void* p, size_t n) {
  const char* c = (const char*)p;
  if (c >= __start_tvms_shared && c + n <= __stop_tvms_shared) return true;
  const unsigned char* u = (const unsigned char*)p;
  return u >= dyn_smem && u + n <= dyn_smem + dyn_smem_bytes;
}

// ---- ldmatrix

TVMS_EMU_STATE const unsigned char* ldmatrix_rows[kMaxThreads];  // the row address each lane gives

// The row address a lane gives, after the checks; null when nothing may be read there.
#ifdef TVMS_EMU_KERNELS
TVMS_EMU_FN const unsigned char* checked_row(int line, const void* row);
#else
TVMS_EMU_FN const unsigned char* checked_row(int line, const void* row) {
  char w[128];
  if (!in_shared(row, 16)) {
    where(w, sizeof w);
    error("line %d: ldmatrix row address %p is not in shared memory (%s)", line, row, w);
    return nullptr;
  }
  if ((uintptr_t)row % 16) {
    where(w, sizeof w);
    error("line %d: ldmatrix row address %p is not 16-byte aligned (%s)", line, row, w);
  }
  return (const unsigned char*)row;
}
#endif  // TVMS_EMU_KERNELS

static inline unsigned short b16_at(const unsigned char* row, unsigned element) {
  unsigned short v = 0xffff;  // a row that failed its checks
  if (row) memcpy(&v, row + 2 * element, 2);
  return v;
}

template <int NUM, bool TRANS>
static void ldmatrix(int line, unsigned* dst, const void* row) {
  unsigned lane = cur->lid & 31u, base = cur->lid & ~31u;
  ldmatrix_rows[cur->lid] = lane < 8u * NUM ? checked_row(line, row) : nullptr;
  syncwarp(line);
  for (unsigned j = 0; j < NUM; ++j) {
    const unsigned char* const* rows = ldmatrix_rows + base + 8 * j;
    unsigned short lo, hi;
    if (TRANS) {  // rows 2*(lane%4) and +1, column lane/4
      lo = b16_at(rows[2 * (lane % 4)], lane / 4);
      hi = b16_at(rows[2 * (lane % 4) + 1], lane / 4);
    } else {      // row lane/4, columns 2*(lane%4) and +1
      lo = b16_at(rows[lane / 4], 2 * (lane % 4));
      hi = b16_at(rows[lane / 4], 2 * (lane % 4) + 1);
    }
    dst[j] = (unsigned)lo | ((unsigned)hi << 16);
  }
  syncwarp(line);  // every lane has read the rows before any gives new ones
}

// ---- mma.sync

enum InputKind { F16, BF16, TF32 };
TVMS_EMU_STATE unsigned mma_regs[kMaxThreads][6];  // each lane's A (4) and B (2) registers

static inline float f16_bits(unsigned short b) {
  half h;
  memcpy(&h, &b, 2);
  return (float)h;
}

// f16x2 registers (element 2r the low half of register r) as floats, and back (rounded).
static inline void unpack_halves(const unsigned* regs, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = f16_bits((unsigned short)(regs[i / 2] >> (16 * (i % 2))));
}

static inline void pack_halves(const float* in, unsigned* regs, int n) {
  for (int r = 0; r < n / 2; ++r) {
    half lo = (half)in[2 * r], hi = (half)in[2 * r + 1];
    unsigned short l, h;
    memcpy(&l, &lo, 2);
    memcpy(&h, &hi, 2);
    regs[r] = (unsigned)l | ((unsigned)h << 16);
  }
}

static inline float bf16_bits(unsigned short b) {
  unsigned u = (unsigned)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// fp32 to tf32 as cvt.rna.tf32.f32: 10 mantissa bits, to nearest, ties away from zero.
static inline float tf32_bits(unsigned u) {
  if ((u & 0x7f800000u) != 0x7f800000u) {
    u = (u + 0x1000u) & ~0x1fffu;
  } else if (u & 0x7fffffu) {
    u |= 0x400000u;  // a NaN stays a (quiet) NaN
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline float b16_value(unsigned reg, unsigned half_index, InputKind kind) {
  unsigned short b = (unsigned short)(reg >> (16 * half_index));
  return kind == BF16 ? bf16_bits(b) : f16_bits(b);
}

// The warp's A (16 x K) and B (K x 8) from the registers its lanes gave (PTX ISA, "Matrix
// Fragments for mma.m16n8k16 with floating point type" and "... for mma.m16n8k8"), with
// groupID g = lane >> 2 and threadID_in_group t = lane % 4:
// - f16/bf16, k16: A register i holds row g + 8*(i&1), columns 2t + 8*(i>>1) and +1 (low half
//   first); B register i holds rows 2t + 8i and +1, column g;
// - tf32, k8: A register i holds row g + 8*(i&1), column t + 4*(i>>1); B register i, row t + 4i,
//   column g.
#ifdef TVMS_EMU_KERNELS
TVMS_EMU_FN void gather(unsigned base, InputKind kind, float a[16][16], float b[16][8]);
#else
TVMS_EMU_FN void gather(unsigned base, InputKind kind, float a[16][16], float b[16][8]) {
  for (unsigned lane = 0; lane < 32; ++lane) {
    const unsigned* r = mma_regs[base + lane];
    unsigned g = lane >> 2, t = lane & 3u;
    for (unsigned i = 0; i < 4; ++i) {
      if (kind == TF32) {
        a[g + 8 * (i & 1)][t + 4 * (i >> 1)] = tf32_bits(r[i]);
      } else {
        for (unsigned h = 0; h < 2; ++h) a[g + 8 * (i & 1)][2 * t + 8 * (i >> 1) + h] = b16_value(r[i], h, kind);
      }
    }
    for (unsigned i = 0; i < 2; ++i) {
      if (kind == TF32) {
        b[t + 4 * i][g] = tf32_bits(r[4 + i]);
      } else {
        for (unsigned h = 0; h < 2; ++h) b[2 * t + 8 * i + h][g] = b16_value(r[4 + i], h, kind);
      }
    }
  }
}
#endif  // TVMS_EMU_KERNELS

// The lane's four accumulator elements of D = A * B + C: element i is at row g + 8*(i>>1),
// column 2t + (i&1) (the same for f32 registers and for the halves of two f16x2 registers).
template <int K>
static void mma(int line, InputKind kind, const unsigned* a_regs, const unsigned* b_regs, const float c[4],
                float d[4]) {
  unsigned lane = cur->lid & 31u, base = cur->lid & ~31u;
  for (int i = 0; i < 4; ++i) mma_regs[cur->lid][i] = a_regs[i];
  for (int i = 0; i < 2; ++i) mma_regs[cur->lid][4 + i] = b_regs[i];
  syncwarp(line);
  float a[16][16], b[16][8];
  gather(base, kind, a, b);
  syncwarp(line);  // every lane has read the registers before any gives new ones
  unsigned g = lane >> 2, t = lane & 3u;
  for (unsigned i = 0; i < 4; ++i) {
    unsigned row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
    float sum = c[i];
    for (int k = 0; k < K; ++k) sum += a[row][k] * b[k][col];
    d[i] = sum;
  }
}

static inline unsigned float_bits(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}

// ---- cp.async

struct Copy {
  unsigned char* dst;
  const unsigned char* src;
  unsigned bytes;
  bool zero_fill;
};
struct Pending {
  std::vector<Copy> open;                 // issued, not yet committed
  std::deque<std::vector<Copy>> groups;   // committed, oldest first
};
TVMS_EMU_STATE Pending pending[kMaxThreads];

static inline void perform(const std::vector<Copy>& copies) {
  for (const Copy& c : copies) {
    if (c.zero_fill) {
      memset(c.dst, 0, c.bytes);
    } else {
      memcpy(c.dst, c.src, c.bytes);
    }
  }
}

#ifdef TVMS_EMU_KERNELS
TVMS_EMU_FN void cp_async(int line, void* dst, const void* src, unsigned bytes, bool pred);
TVMS_EMU_FN void commit_group();
TVMS_EMU_FN void wait_group(unsigned n);
#else
TVMS_EMU_FN void cp_async(int line, void* dst, const void* src, unsigned bytes, bool pred) {
  char w[128];
  if (!in_shared(dst, bytes)) {
    where(w, sizeof w);
    error("line %d: cp.async destination %p is not %u bytes of shared memory (%s)", line, dst, bytes, w);
    return;
  }
  if ((uintptr_t)dst % bytes || (pred && (uintptr_t)src % bytes)) {
    where(w, sizeof w);
    error("line %d: cp.async of %u bytes from %p to %p: both addresses must be %u-byte aligned (%s)", line, bytes, src,
          dst, bytes, w);
    return;
  }
  if (eager_copies) {
    perform({{(unsigned char*)dst, (const unsigned char*)src, bytes, !pred}});
    return;
  }
  pending[cur->lid].open.push_back({(unsigned char*)dst, (const unsigned char*)src, bytes, !pred});
}

TVMS_EMU_FN void commit_group() {
  Pending& p = pending[cur->lid];
  p.groups.push_back(std::move(p.open));
  p.open.clear();
}

TVMS_EMU_FN void wait_group(unsigned n) {
  Pending& p = pending[cur->lid];
  while (p.groups.size() > n) {
    perform(p.groups.front());
    p.groups.pop_front();
  }
}
#endif  // TVMS_EMU_KERNELS

}  // namespace ptx

#ifndef TVMS_EMU_KERNELS
static void ptx_block_start() {
  for (unsigned i = 0; i < nthreads; ++i) {
    ptx::pending[i].open.clear();
    ptx::pending[i].groups.clear();
  }
}

static void ptx_block_end() {
  for (unsigned i = 0; i < nthreads; ++i) {
    ptx::Pending& p = ptx::pending[i];
    for (const auto& group : p.groups) ptx::perform(group);
    ptx::perform(p.open);
    p.groups.clear();
    p.open.clear();
  }
}
#endif  // TVMS_EMU_KERNELS

}  // namespace tvms_emu

// ---- the helpers the printed code calls (compiler/codegen_cuda/ptx.py's HELPERS)

#define TVMS_EMU_LDMATRIX(name, num, trans)                                                  \
  static inline void name(unsigned* dst, const void* smem_row, int line = __builtin_LINE()) { \
    ::tvms_emu::ptx::ldmatrix<num, trans>(line, dst, smem_row);                              \
  }
TVMS_EMU_LDMATRIX(tvms_ldmatrix_x1, 1, false)
TVMS_EMU_LDMATRIX(tvms_ldmatrix_x2, 2, false)
TVMS_EMU_LDMATRIX(tvms_ldmatrix_x4, 4, false)
TVMS_EMU_LDMATRIX(tvms_ldmatrix_x1_trans, 1, true)
TVMS_EMU_LDMATRIX(tvms_ldmatrix_x2_trans, 2, true)
TVMS_EMU_LDMATRIX(tvms_ldmatrix_x4_trans, 4, true)
#undef TVMS_EMU_LDMATRIX

static inline void tvms_mma_m16n8k16_f32_f16(float* c, const unsigned* a, const unsigned* b,
                                             int line = __builtin_LINE()) {
  float c_in[4] = {c[0], c[1], c[2], c[3]};
  ::tvms_emu::ptx::mma<16>(line, ::tvms_emu::ptx::F16, a, b, c_in, c);
}

static inline void tvms_mma_m16n8k16_f32_bf16(float* c, const unsigned* a, const unsigned* b,
                                              int line = __builtin_LINE()) {
  float c_in[4] = {c[0], c[1], c[2], c[3]};
  ::tvms_emu::ptx::mma<16>(line, ::tvms_emu::ptx::BF16, a, b, c_in, c);
}

// Two f16x2 accumulator registers: elements 0, 1 in c[0] (low half first), 2, 3 in c[1].
static inline void tvms_mma_m16n8k16_f16_f16(unsigned* c, const unsigned* a, const unsigned* b,
                                             int line = __builtin_LINE()) {
  float c_in[4], d[4];
  ::tvms_emu::ptx::unpack_halves(c, c_in, 4);
  ::tvms_emu::ptx::mma<16>(line, ::tvms_emu::ptx::F16, a, b, c_in, d);
  ::tvms_emu::ptx::pack_halves(d, c, 4);
}

static inline void tvms_mma_m16n8k8_f32_tf32(float* c, const float* a, const float* b, int line = __builtin_LINE()) {
  unsigned a_bits[4], b_bits[2];
  for (int i = 0; i < 4; ++i) a_bits[i] = ::tvms_emu::ptx::float_bits(a[i]);
  for (int i = 0; i < 2; ++i) b_bits[i] = ::tvms_emu::ptx::float_bits(b[i]);
  float c_in[4] = {c[0], c[1], c[2], c[3]};
  ::tvms_emu::ptx::mma<8>(line, ::tvms_emu::ptx::TF32, a_bits, b_bits, c_in, c);
}

#define TVMS_EMU_CP_ASYNC(bytes)                                                                                 \
  static inline void tvms_cp_async##bytes(void* smem, const void* gmem, int line = __builtin_LINE()) {         \
    ::tvms_emu::ptx::cp_async(line, smem, gmem, bytes, true);                                                   \
  }                                                                                                              \
  static inline void tvms_cp_async##bytes##_zfill(void* smem, const void* gmem, bool pred,                      \
                                                  int line = __builtin_LINE()) {                                \
    ::tvms_emu::ptx::cp_async(line, smem, gmem, bytes, pred);                                                   \
  }
TVMS_EMU_CP_ASYNC(4)
TVMS_EMU_CP_ASYNC(8)
TVMS_EMU_CP_ASYNC(16)
#undef TVMS_EMU_CP_ASYNC

static inline void tvms_cp_async_commit() { ::tvms_emu::ptx::commit_group(); }

template <int N>
static inline void tvms_cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group takes a non-negative count");
  ::tvms_emu::ptx::wait_group((unsigned)N);
}

// ---- wgmma (Hopper)

namespace tvms_emu {
namespace ptx {

// The descriptor of a 128-byte-swizzled shared tile at `smem`: start address (from the dynamic
// shared memory's start), leading and stride byte offsets, 16-byte units.
static inline unsigned long long wgmma_desc(int line, const void* smem, unsigned lbo, unsigned sbo) {
  const unsigned char* p = (const unsigned char*)smem;
  if (p < dyn_smem || p >= dyn_smem + dyn_smem_bytes) {
    error("line %d: a wgmma descriptor's tile %p is not in dynamic shared memory", line, smem);
    return 0;
  }
  unsigned long long addr = (unsigned long long)(p - dyn_smem);
  if (addr & 15u) error("line %d: a wgmma descriptor's tile is not 16-byte aligned", line);
  return ((addr & 0x3FFFFull) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}

// Element (mn, k) of the operand `desc` describes, as a float.
static inline float wgmma_operand(int line, unsigned long long desc, unsigned mn, unsigned k, bool mn_major,
                                  InputKind kind) {
  if ((desc >> 62) != 1u) {
    error("line %d: a wgmma descriptor asks for swizzle mode %u; the emulator knows 128-byte swizzling (1) only",
          line, (unsigned)(desc >> 62));
    return 0.f;
  }
  unsigned long long start = (desc & 0x3FFFull) << 4, lbo = ((desc >> 16) & 0x3FFFull) << 4,
                     sbo = ((desc >> 32) & 0x3FFFull) << 4;
  unsigned size = kind == TF32 ? 4u : 2u;
  unsigned long long at = mn_major ? start + (mn / 64) * lbo + 2 * (mn % 64) + (k / 8) * sbo + (k % 8) * 128
                                   : start + (mn / 8) * sbo + (mn % 8) * 128 + size * k;
  at ^= ((at >> 7) & 7u) << 4;
  if (at + size > dyn_smem_bytes) {
    error("line %d: wgmma reads byte %llu of dynamic shared memory, past its %zu", line, at, dyn_smem_bytes);
    return 0.f;
  }
  if (kind == TF32) {
    unsigned u;
    memcpy(&u, dyn_smem + at, 4);
    u &= ~0x1fffu;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  unsigned short bits;
  memcpy(&bits, dyn_smem + at, 2);
  return kind == BF16 ? bf16_bits(bits) : f16_bits(bits);
}

// The K of one wgmma: 32 bytes of each operand row.
static inline unsigned wgmma_k(InputKind kind) { return kind == TF32 ? 8u : 16u; }

// D += A * B for the calling thread's elements of a warpgroup's m64nNk16 (k8 for tf32; float
// accumulators: d[N / 2]).
static void wgmma_perform(int line, int n, float* d, unsigned long long desc_a, unsigned long long desc_b,
                          bool trans_a, bool trans_b, InputKind kind) {
  unsigned t = cur->lid % 128u, w = t / 32u, lane = t % 32u;
  for (unsigned i = 0; i < (unsigned)n / 2; ++i) {
    unsigned row = 16 * w + lane / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
    float sum = 0.f;
    for (unsigned k = 0; k < wgmma_k(kind); ++k)
      sum += wgmma_operand(line, desc_a, row, k, trans_a, kind) * wgmma_operand(line, desc_b, col, k, trans_b, kind);
    d[i] += sum;
  }
}

// A wgmma issued and not yet waited for: its registers (float, or f16x2 when `halves`) and
// operands. It is performed (reading shared memory then) by the wgmma.wait_group that covers
// it, as the GPU's registers hold D only from then on.
struct Wgmma {
  int line, n;
  void* d;
  bool halves, trans_a, trans_b;
  InputKind kind;
  unsigned long long desc_a, desc_b;
  unsigned long long digest;  // of the operand elements the thread reads, when it issued it
};

// A digest (FNV-1a) of the operand elements the calling thread's part of `op` reads: its two
// rows of A and its columns of B, over k.
static unsigned long long wgmma_digest(const Wgmma& op) {
  unsigned t = cur->lid % 128u, w = t / 32u, lane = t % 32u;
  unsigned long long h = 1469598103934665603ull;
  auto mix = [&h](float v) {
    unsigned u;
    memcpy(&u, &v, 4);
    h = (h ^ u) * 1099511628211ull;
  };
  for (unsigned r = 0; r < 2; ++r)
    for (unsigned k = 0; k < wgmma_k(op.kind); ++k)
      mix(wgmma_operand(op.line, op.desc_a, 16 * w + lane / 4 + 8 * r, k, op.trans_a, op.kind));
  for (unsigned i = 0; i < (unsigned)op.n / 2; i += 2)
    for (unsigned e = 0; e < 2; ++e)
      for (unsigned k = 0; k < wgmma_k(op.kind); ++k)
        mix(wgmma_operand(op.line, op.desc_b, 8 * (i / 4) + 2 * (lane % 4) + e, k, op.trans_b, op.kind));
  return h;
}

struct WgmmaQueue {
  unsigned long long launch;          // the launch and block whose thread issued them
  uint3 block;
  std::vector<Wgmma> open;            // since the last commit
  std::deque<std::vector<Wgmma>> groups;
};

// The calling thread's queue; one a thread of an earlier block of the launch left is dropped
// (its results were never read: reported, as a GPU would have discarded them with the thread's
// registers), as is one an earlier launch left.
static WgmmaQueue& wgmma_queue(int line) {
  static WgmmaQueue queues[kMaxThreads];
  WgmmaQueue& q = queues[cur->lid];
  if (q.launch != launch_serial || q.block.x != blockIdx.x || q.block.y != blockIdx.y || q.block.z != blockIdx.z) {
    if (q.launch == launch_serial && (!q.open.empty() || !q.groups.empty()))
      error("line %d: a thread of block (%u, %u, %u) returned with wgmma groups it never waited for", line,
            q.block.x, q.block.y, q.block.z);
    q.open.clear();
    q.groups.clear();
    q.launch = launch_serial;
    q.block = blockIdx;
  }
  return q;
}

static void wgmma_perform(const Wgmma& op) {
  if (wgmma_digest(op) != op.digest)
    error("line %d: the shared memory a wgmma reads changed between its issue and the wait that covers it "
          "(on a GPU it may still have been reading it)", op.line);
  if (!op.halves) {
    wgmma_perform(op.line, op.n, (float*)op.d, op.desc_a, op.desc_b, op.trans_a, op.trans_b, op.kind);
    return;
  }
  float acc[128];
  unpack_halves((unsigned*)op.d, acc, op.n / 2);
  wgmma_perform(op.line, op.n, acc, op.desc_a, op.desc_b, op.trans_a, op.trans_b, F16);
  pack_halves(acc, (unsigned*)op.d, op.n / 2);
}

static void wgmma_issue(Wgmma op) {
  op.digest = wgmma_digest(op);
  wgmma_queue(op.line).open.push_back(op);
}

static void wgmma_commit(int line) {
  WgmmaQueue& q = wgmma_queue(line);
  q.groups.push_back(std::move(q.open));
  q.open.clear();
}

// wgmma.wait_group N: every committed group but the N most recent is done.
static void wgmma_wait(int line, unsigned n) {
  WgmmaQueue& q = wgmma_queue(line);
  while (q.groups.size() > n) {
    for (const Wgmma& op : q.groups.front()) wgmma_perform(op);
    q.groups.pop_front();
  }
}

}  // namespace ptx
}  // namespace tvms_emu

static inline unsigned long long tvms_wgmma_desc(const void* smem, unsigned lbo, unsigned sbo,
                                                 int line = __builtin_LINE()) {
  return ::tvms_emu::ptx::wgmma_desc(line, smem, lbo, sbo);
}
static inline void tvms_wgmma_fence() {}
static inline void tvms_wgmma_commit(int line = __builtin_LINE()) { ::tvms_emu::ptx::wgmma_commit(line); }
template <int N> static inline void tvms_wgmma_wait(int line = __builtin_LINE()) {
  ::tvms_emu::ptx::wgmma_wait(line, N);
}
static inline void tvms_fence_proxy_async() {}

#define TVMS_EMU_WGMMA(n, kk, acc, ctype, in, halves, kind, tb)                                               \
  static inline void tvms_wgmma_m64n##n##k##kk##_##acc##_##in##_t0##tb(ctype* d, unsigned long long desc_a,  \
                                                                      unsigned long long desc_b,            \
                                                                      int line = __builtin_LINE()) {        \
    ::tvms_emu::ptx::wgmma_issue({line, n, d, halves, false, tb, ::tvms_emu::ptx::kind, desc_a, desc_b, 0}); \
  }
#define TVMS_EMU_WGMMA_ALL(n)                                                                                \
  TVMS_EMU_WGMMA(n, 16, f32, float, f16, false, F16, 0)                                                      \
  TVMS_EMU_WGMMA(n, 16, f32, float, f16, false, F16, 1)                                                      \
  TVMS_EMU_WGMMA(n, 16, f32, float, bf16, false, BF16, 0)                                                    \
  TVMS_EMU_WGMMA(n, 16, f32, float, bf16, false, BF16, 1)                                                    \
  TVMS_EMU_WGMMA(n, 16, f16, unsigned, f16, true, F16, 0)                                                    \
  TVMS_EMU_WGMMA(n, 16, f16, unsigned, f16, true, F16, 1)                                                    \
  TVMS_EMU_WGMMA(n, 8, f32, float, tf32, false, TF32, 0)
TVMS_EMU_WGMMA_ALL(64)
TVMS_EMU_WGMMA_ALL(128)
TVMS_EMU_WGMMA_ALL(256)
#undef TVMS_EMU_WGMMA_ALL
#undef TVMS_EMU_WGMMA

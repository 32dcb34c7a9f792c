// Per-launch counters for the CUDA printer's trace mode (compiler/codegen_cuda/trace.py), so that
// a kernel's memory transactions, bank conflicts and instructions can be known without a GPU.
// Included by cuda_emulator_shim.h (after the block scheduler's state, before run_block); read
// from Python by tests/support/cuda_counters.py.
//
// Traced CUDA C calls, per thread:
// - tvms_trace(SITE, FLAGS, ptr): one access of sizeof(*ptr) bytes (FLAGS: 0 global, 1 shared,
//   +2 a store, +4 a load never served from registers: an asm volatile instruction, cp.async or
//   ldmatrix); returns ptr;
// - tvms_trace_if(SITE, FLAGS, ptr, cond): the same when cond holds (a cp.async whose predicate
//   may make it a zero fill, which reads nothing);
// - tvms_trace_rows(SITE, FLAGS, ptr, lanes): an ldmatrix row address: lanes below `lanes` (8 per
//   matrix) read 16 bytes at ptr, one warp-level instruction, so a phase of 8 lanes is one
//   matrix's 8 rows and the bank conflicts are counted per matrix, as the hardware reads them;
// - tvms_trace_tile(SITE, FLAGS, ptr, ldm, rows, cols, col_major): a wmma tile load or store,
//   recorded as the instructions a warp would issue for it (below); returns ptr;
// - tvms_ops(SITE, fma, fp32, fp16, special): the operations of one executed statement;
// - tvms_mma(SITE, m, n, k, precision): one warp-wide tensor-core operation.
//
// A warp-level instruction is the accesses the lanes of one warp make at one SITE, the n-th
// execution by each lane with the n-th of the others (counted per lane since the warp last
// stopped: the fibers of a warp run one after another up to the next barrier or shuffle, and
// each such stop flushes the warp's records here). For each instruction:
// - global: 1 request, the distinct 32-byte sectors its lanes touch, the bytes they ask for,
//   and the distinct 128-byte lines (the L1's data wavefronts);
// - shared: 1 request and its wavefronts: accesses of 4 bytes or less are served together,
//   8-byte ones in 2 phases of 16 lanes and 16-byte ones in 4 phases of 8 lanes (CUDA C
//   Programming Guide, "Shared Memory" of compute capabilities 5.x and later); within a phase,
//   32 banks of 4-byte words, lanes reading the same word share it, and the phase takes as many
//   wavefronts as the bank asked for the most distinct words. The ideal is one per phase used.
// - registers instead of memory: a load whose lanes read exactly what an earlier load of the
//   same warp read (the last 16 distinct loads; none since a barrier or a store by the warp to
//   that space) is counted as `reused`, not as a request: nvcc keeps such values in registers
//   (common subexpressions, loads hoisted out of unrolled loops).
// - tvms_ops and tvms_mma: thread-level totals (executions times operations), and warp-level
//   instructions (per warp and site, the most executions of any of its lanes).
// A wmma tile of `rows` x `cols` at leading dimension `ldm` is recorded as ldmatrix reads it: 16-byte
// pieces of its rows (columns when col_major), each instruction 32 of them, each phase of 8 lanes
// 8 consecutive rows at one column offset; a store writes 8-byte pieces, a phase of 16 lanes
// covering 4 rows x 4 pieces, as the mma accumulator layout does.

#pragma once

#include <algorithm>
#include <vector>

namespace tvms_emu {
namespace counters {

// The totals of one launch, in the order tvms_emu__counters() copies them out (cuda_counters.py
// reads them by these names).
enum Field {
  GLD_REQ, GLD_SECTORS, GLD_BYTES, GLD_LINES, GST_REQ, GST_SECTORS, GST_BYTES, GST_LINES,
  SLD_REQ, SLD_WAVES, SLD_IDEAL, SST_REQ, SST_WAVES, SST_IDEAL, REUSED,
  FMA, FP32, FP16, SPECIAL, FMA_INST, FP32_INST, FP16_INST, SPECIAL_INST,
  MMA, MMA_FP16_FLOPS, MMA_BF16_FLOPS, MMA_TF32_FLOPS, MMA_INT8_FLOPS, BLOCKS_RUN, NFIELDS
};
enum SiteKind : unsigned char { NONE, MEM, OPS, MMA_SITE };
static const unsigned kMaxSites = 4096;
static const unsigned kHistory = 16;

struct Site {
  SiteKind kind;
  int v[4];  // OPS: fma, fp32, fp16, special; MMA_SITE: m, n, k, precision
};
struct Access {
  unsigned site, n, seq;
  unsigned char lane, flags;
  unsigned short bytes;
  uintptr_t addr;
};
struct Group {  // one warp-level memory instruction
  unsigned first, count, order;
  unsigned long long signature;
};

TVMS_EMU_STATE bool enabled TVMS_EMU_INIT(= false);
TVMS_EMU_STATE unsigned long long totals[NFIELDS];
TVMS_EMU_STATE Site sites[kMaxSites];
TVMS_EMU_STATE unsigned seen[32][kMaxSites];  // executions per lane and site since the warp last stopped
TVMS_EMU_STATE bool in_window[kMaxSites];
TVMS_EMU_STATE unsigned seq[32];
TVMS_EMU_STATE std::vector<unsigned> touched;
TVMS_EMU_STATE std::vector<Access> pending;
TVMS_EMU_STATE unsigned long long history[kMaxThreads / 32][kHistory];  // signatures of recent loads, per warp
TVMS_EMU_STATE unsigned history_len[kMaxThreads / 32];

#ifndef TVMS_EMU_KERNELS
static void begin_launch() {
  memset(totals, 0, sizeof totals);
  memset(history_len, 0, sizeof history_len);
  memset(seq, 0, sizeof seq);
  for (unsigned s : touched) {
    in_window[s] = false;
    for (unsigned l = 0; l < 32; ++l) seen[l][s] = 0;
  }
  touched.clear();
  pending.clear();
}
#endif  // TVMS_EMU_KERNELS

// The calling lane's count of earlier executions of `site` since its warp last stopped.
static inline unsigned bump(unsigned site, SiteKind kind) {
  if (site >= kMaxSites) {
    error("trace site %u: the emulator counts at most %u sites per kernel", site, kMaxSites);
    return 0;
  }
  sites[site].kind = kind;
  if (!in_window[site]) {
    in_window[site] = true;
    touched.push_back(site);
  }
  return seen[cur->lid & 31u][site]++;
}

static inline void record(int site, int flags, const void* p, size_t bytes) {
  if (!enabled) return;
  unsigned lane = cur->lid & 31u;
  unsigned n = bump((unsigned)site, MEM);
  pending.push_back({(unsigned)site, n, seq[lane]++, (unsigned char)lane, (unsigned char)flags, (unsigned short)bytes,
                     (uintptr_t)p});
}

// A wmma tile: the calling lane records its pieces (piece j goes to lane j % 32, instruction j / 32).
static inline void record_tile(int site, int flags, const char* p, size_t ldm_bytes, unsigned lines,
                               unsigned line_bytes, size_t elem) {
  if (!enabled) return;
  bool store = flags & 2;
  unsigned piece = store ? 8 : 16;
  if (line_bytes % piece) piece = (unsigned)elem;
  unsigned per_line = line_bytes / piece, group = store && per_line % 4 == 0 ? 4 : 1;
  unsigned rows8 = lines < 8 ? lines : 8, per_block = rows8 * per_line, total = lines * per_line;
  for (unsigned j = cur->lid & 31u; j < total; j += 32) {
    unsigned g = j / per_block, r = j % per_block, cg = r / (rows8 * group), r2 = r % (rows8 * group);
    unsigned line = g * rows8 + r2 / group, col = cg * group + r2 % group;
    record(site, flags, p + line * ldm_bytes + (size_t)col * piece, piece);
  }
}

static inline void ops(int site, int fma, int fp32, int fp16, int special) {
  if (!enabled) return;
  bump((unsigned)site, OPS);
  sites[site] = {OPS, {fma, fp32, fp16, special}};
}

static inline void mma(int site, int m, int n, int k, int precision) {
  if (!enabled) return;
  bump((unsigned)site, MMA_SITE);
  sites[site] = {MMA_SITE, {m, n, k, precision}};
}

// Operations and MMAs of the sites executed since the warp last stopped.
#ifndef TVMS_EMU_KERNELS
static void flush_sites() {
  for (unsigned s : touched) {
    unsigned long long most = 0, sum = 0;
    for (unsigned l = 0; l < 32; ++l) {
      most = std::max<unsigned long long>(most, seen[l][s]);
      sum += seen[l][s];
      seen[l][s] = 0;
    }
    in_window[s] = false;
    const Site& site = sites[s];
    if (site.kind == OPS) {
      for (int i = 0; i < 4; ++i) {
        totals[FMA + i] += sum * (unsigned long long)site.v[i];
        totals[FMA_INST + i] += most * (unsigned long long)site.v[i];
      }
    } else if (site.kind == MMA_SITE) {
      totals[MMA] += most;
      int precision = site.v[3] >= 0 && site.v[3] < 4 ? site.v[3] : 0;
      totals[MMA_FP16_FLOPS + precision] += most * 2ull * site.v[0] * site.v[1] * site.v[2];
    }
  }
  touched.clear();
}

static unsigned distinct(std::vector<unsigned long long>& v) {
  std::sort(v.begin(), v.end());
  return (unsigned)(std::unique(v.begin(), v.end()) - v.begin());
}

// Sectors (32 bytes) and lines (128 bytes) of a global instruction.
static void global_request(const Access* a, unsigned count, bool store) {
  static std::vector<unsigned long long> sectors, lines;
  sectors.clear();
  lines.clear();
  unsigned long long bytes = 0;
  for (unsigned i = 0; i < count; ++i) {
    bytes += a[i].bytes;
    for (uintptr_t s = a[i].addr >> 5; s <= (a[i].addr + a[i].bytes - 1) >> 5; ++s) sectors.push_back(s);
    for (uintptr_t s = a[i].addr >> 7; s <= (a[i].addr + a[i].bytes - 1) >> 7; ++s) lines.push_back(s);
  }
  int base = store ? GST_REQ : GLD_REQ;
  totals[base] += 1;
  totals[base + 1] += distinct(sectors);
  totals[base + 2] += bytes;
  totals[base + 3] += distinct(lines);
}

// Wavefronts of a shared-memory instruction, and the ideal (one per phase used).
static void shared_request(const Access* a, unsigned count, bool store) {
  static std::vector<unsigned long long> words[4];
  unsigned bytes = 0;
  for (unsigned i = 0; i < count; ++i) bytes = std::max<unsigned>(bytes, a[i].bytes);
  unsigned phases = bytes <= 4 ? 1 : bytes <= 8 ? 2 : 4, lanes_per_phase = 32 / phases;
  for (unsigned p = 0; p < phases; ++p) words[p].clear();
  for (unsigned i = 0; i < count; ++i)
    for (uintptr_t w = a[i].addr >> 2; w <= (a[i].addr + a[i].bytes - 1) >> 2; ++w)
      words[a[i].lane / lanes_per_phase].push_back(((unsigned long long)(w & 31u) << 58) | (w & ((1ull << 58) - 1)));
  unsigned long long waves = 0, ideal = 0;
  for (unsigned p = 0; p < phases; ++p) {
    if (words[p].empty()) continue;
    unsigned n = distinct(words[p]);  // (bank, word) pairs, sorted by bank
    unsigned most = 0, run = 0;
    for (unsigned i = 0; i < n; ++i) {
      run = i && (words[p][i] >> 58) == (words[p][i - 1] >> 58) ? run + 1 : 1;
      most = std::max(most, run);
    }
    waves += most;
    ideal += 1;
  }
  int base = store ? SST_REQ : SLD_REQ;
  totals[base] += 1;
  totals[base + 1] += waves;
  totals[base + 2] += ideal;
}

// Whether a load of the warp `warp` repeats one of its recent loads (then it comes from
// registers); remembers it otherwise. A store forgets the loads of its space.
static bool reused(unsigned warp, unsigned flags, unsigned long long signature) {
  unsigned long long* h = history[warp];
  unsigned& len = history_len[warp];
  if (flags & 2) {
    unsigned kept = 0;
    for (unsigned i = 0; i < len; ++i)
      if ((h[i] & 1u) != (flags & 1u)) h[kept++] = h[i];
    len = kept;
    return false;
  }
  signature = (signature << 1) | (flags & 1u);
  for (unsigned i = 0; i < len; ++i)
    if (h[i] == signature) return true;
  if (len == kHistory) {
    memmove(h, h + 1, (kHistory - 1) * sizeof *h);
    --len;
  }
  h[len++] = signature;
  return false;
}

static void flush_memory(unsigned warp) {
  std::sort(pending.begin(), pending.end(), [](const Access& x, const Access& y) {
    return x.site != y.site ? x.site < y.site : x.n != y.n ? x.n < y.n : x.lane < y.lane;
  });
  static std::vector<Group> groups;
  groups.clear();
  for (unsigned i = 0; i < pending.size();) {
    Group g{i, 0, ~0u, 1469598103934665603ull};
    for (; i < pending.size() && pending[i].site == pending[g.first].site && pending[i].n == pending[g.first].n; ++i) {
      const Access& a = pending[i];
      g.order = std::min(g.order, a.seq);
      for (unsigned long long x : {(unsigned long long)a.lane, (unsigned long long)a.addr, (unsigned long long)a.bytes})
        g.signature = (g.signature ^ x) * 1099511628211ull;
      g.count++;
    }
    groups.push_back(g);
  }
  std::sort(groups.begin(), groups.end(), [](const Group& x, const Group& y) { return x.order < y.order; });
  for (const Group& g : groups) {
    const Access* a = &pending[g.first];
    bool store = a->flags & 2;
    if (!(a->flags & 4) && reused(warp, a->flags, g.signature)) {
      totals[REUSED] += 1;
    } else if (a->flags & 1) {
      shared_request(a, g.count, store);
    } else {
      global_request(a, g.count, store);
    }
  }
  pending.clear();
}

// Called when every lane of the warp starting at thread `base` has stopped: at a barrier, a
// shuffle (or a wmma operation) or the end. A barrier or the end forgets the warp's recent
// loads: other warps may write what it reads next.
static void flush(unsigned base) {
  bool shuffle = false;
  for (unsigned i = base; i < base + 32 && i < nthreads; ++i) shuffle |= fibers[i].state == AT_SHUFFLE;
  flush_sites();
  if (!pending.empty()) flush_memory(base / 32);
  if (!shuffle) history_len[base / 32] = 0;
  memset(seq, 0, sizeof seq);
}
#endif  // TVMS_EMU_KERNELS

// The blocks a launch runs (linear indices, sorted); empty: all of them. Counting a big grid
// runs a sample and scales the totals (cuda_counters.py).
TVMS_EMU_STATE std::vector<unsigned long long> selected;

static inline bool skip_block(unsigned long long b) {
  return !selected.empty() && !std::binary_search(selected.begin(), selected.end(), b);
}

}  // namespace counters
}  // namespace tvms_emu

#ifndef TVMS_EMU_KERNELS
extern "C" {
// Counting on (or off) for the next launches; each launch starts its totals from zero.
__attribute__((visibility("default"))) void tvms_emu__trace(int enable) { tvms_emu::counters::enabled = enable != 0; }
// The last launch's totals, in `Field` order; returns how many there are.
__attribute__((visibility("default"))) int tvms_emu__counters(unsigned long long* out, int n) {
  for (int i = 0; i < n && i < tvms_emu::counters::NFIELDS; ++i) out[i] = tvms_emu::counters::totals[i];
  return tvms_emu::counters::NFIELDS;
}
// Run only the blocks `ids` (linear indices, x fastest) of the next launches; n = 0: all.
__attribute__((visibility("default"))) void tvms_emu__select_blocks(const unsigned long long* ids,
                                                                    unsigned long long n) {
  tvms_emu::counters::selected.assign(ids, ids + n);
  std::sort(tvms_emu::counters::selected.begin(), tvms_emu::counters::selected.end());
}
}
#endif  // TVMS_EMU_KERNELS

template <typename T>
static inline T* tvms_trace(int site, int flags, T* p) {
  ::tvms_emu::counters::record(site, flags, (const void*)p, sizeof(T));
  return p;
}

template <typename T>
static inline T* tvms_trace_if(int site, int flags, T* p, bool cond) {
  if (cond) ::tvms_emu::counters::record(site, flags, (const void*)p, sizeof(T));
  return p;
}

template <typename T>
static inline T* tvms_trace_rows(int site, int flags, T* p, int lanes) {
  if (::tvms_emu::counters::enabled && (int)(::tvms_emu::cur->lid & 31u) < lanes)
    ::tvms_emu::counters::record(site, flags, (const void*)p, 16);
  return p;
}

template <typename T>
static inline T* tvms_trace_tile(int site, int flags, T* p, unsigned ldm, int rows, int cols, int col_major) {
  unsigned lines = (unsigned)(col_major ? cols : rows), line_bytes = (unsigned)((col_major ? rows : cols) * sizeof(T));
  ::tvms_emu::counters::record_tile(site, flags, (const char*)p, (size_t)ldm * sizeof(T), lines, line_bytes, sizeof(T));
  return p;
}

static inline void tvms_ops(int site, int fma, int fp32, int fp16, int special) {
  ::tvms_emu::counters::ops(site, fma, fp32, fp16, special);
}

static inline void tvms_mma(int site, int m, int n, int k, int precision) {
  ::tvms_emu::counters::mma(site, m, n, k, precision);
}

// The CPU emulator's scheduler and checks (see include/sinkops_cuda_emu/runtime.h). x86-64 only:
// fibers switch with a few instructions of assembly (callee-saved registers, stack pointer,
// MXCSR and the x87 control word), since swapcontext's signal-mask syscall per switch would
// make emulated kernels ~50x slower.
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

extern "C" void sinkops_emu_switch(void** save_sp, void* load_sp);
asm(R"(
.text
.globl sinkops_emu_switch
.type sinkops_emu_switch,@function
sinkops_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size sinkops_emu_switch, .-sinkops_emu_switch
.section .note.GNU-stack,"",@progbits
.text
)");

namespace sinkops_emu {
namespace {

constexpr size_t kStackBytes = 1 << 20;  // kernels keep big register arrays; pages are touched lazily

struct Copy {
  uint32_t dst;
  const unsigned char* src;
  int bytes, src_bytes;
};

struct Barrier {
  int expected = 0, arrived = 0;
  uint64_t generation = 0;
};

struct Fiber {
  void* sp = nullptr;
  unsigned char* stack = nullptr;
  dim3 tid;
  int linear = 0;
  bool done = false;
  uint64_t collectives = 0;  // parity picks the warp's exchange buffer
  std::deque<std::vector<Copy>> groups;
  std::vector<Copy> open;
};

struct Warp {
  Barrier bar;
  unsigned char slots[2][32][64];
  uint64_t once_tag[2] = {~uint64_t(0), ~uint64_t(0)};
  alignas(16) unsigned char once[2][8192];
};

struct Cta {
  dim3 grid, block, bidx;
  std::vector<unsigned char> smem;
  size_t smem_bytes = 0;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  Barrier bars[16];
  Fiber* cur = nullptr;
  void* sched_sp = nullptr;
  uint64_t progress = 0;
  std::string error;
  const std::function<void()>* body = nullptr;
};

Cta g;
std::mutex g_launch_mutex;  // one emulated launch at a time (the GIL is released around launches)

void yield() { sinkops_emu_switch(&g.cur->sp, g.sched_sp); }

void wait_on(Barrier& b, int expected) {
  if (b.arrived == 0) {
    b.expected = expected;
  } else if (b.expected != expected) {
    fail("barrier reached with different thread counts");
  }
  ++g.progress;
  const uint64_t gen = b.generation;
  if (++b.arrived == b.expected) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  while (b.generation == gen) yield();
}

void perform(const Copy& c) {
  unsigned char* dst = g.smem.data() + c.dst;
  if (c.src_bytes > 0) std::memcpy(dst, c.src, c.src_bytes);
  std::memset(dst + c.src_bytes, 0, c.bytes - c.src_bytes);
}

void drain(Fiber& f) {
  if (!f.open.empty()) {
    f.groups.push_back(std::move(f.open));
    f.open.clear();
  }
  for (auto& grp : f.groups)
    for (auto& c : grp) perform(c);
  f.groups.clear();
}

void fiber_main() {
  (*g.body)();
  drain(*g.cur);
  g.cur->done = true;
  ++g.progress;
  yield();  // never resumed
  std::abort();
}

unsigned char* new_stack() {
  void* p = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("CUDA emulator: cannot map a fiber stack");
  return static_cast<unsigned char*>(p);
}

void start_fiber(Fiber& f) {
  auto top = reinterpret_cast<uintptr_t>(f.stack + kStackBytes) & ~uintptr_t(15);
  auto* frame = reinterpret_cast<uint64_t*>(top - 72);
  // [0] MXCSR | x87 control word, [1..6] r15 r14 r13 r12 rbx rbp, [7] return address, [8] padding
  uint32_t csr[2] = {0x1F80u, 0x037Fu};
  std::memcpy(&frame[0], csr, 8);
  for (int i = 1; i <= 6; ++i) frame[i] = 0;
  frame[7] = reinterpret_cast<uint64_t>(&fiber_main);
  frame[8] = 0;
  f.sp = frame;
  f.done = false;
  f.collectives = 0;
  f.groups.clear();
  f.open.clear();
}

std::vector<unsigned char*>& stack_pool() {
  static std::vector<unsigned char*> pool;
  return pool;
}

void run_cta() {
  const int n = int(g.block.x * g.block.y * g.block.z);
  auto& pool = stack_pool();
  while (int(pool.size()) < n) pool.push_back(new_stack());
  g.fibers.assign(n, Fiber{});
  for (int i = 0; i < n; ++i) {
    Fiber& f = g.fibers[i];
    f.stack = pool[i];
    f.linear = i;
    f.tid = dim3(i % g.block.x, (i / g.block.x) % g.block.y, i / (g.block.x * g.block.y));
    start_fiber(f);
  }
  g.warps.assign((n + 31) / 32, Warp{});  // fresh tags: no scratch survives a CTA
  for (auto& b : g.bars) b = Barrier{};
  std::memset(g.smem.data(), 0xFF, g.smem.size());  // NaN in bf16, fp16 and fp32: stale reads show
  int live = n;
  while (live > 0) {
    const uint64_t before = g.progress;
    for (auto& f : g.fibers) {
      if (f.done) continue;
      g.cur = &f;
      sinkops_emu_switch(&g.sched_sp, f.sp);
      if (!g.error.empty()) return;
      if (f.done) --live;
    }
    if (live > 0 && g.progress == before) {
      g.error = "deadlock: every live thread waits at a barrier or warp collective that cannot complete";
      return;
    }
  }
}

}  // namespace

const dim3& thread_idx() { return g.cur->tid; }
const dim3& block_idx() { return g.bidx; }
const dim3& block_dim() { return g.block; }
const dim3& grid_dim() { return g.grid; }
int lane_id() { return g.cur->linear % 32; }

void fail(const char* what) {
  if (g.error.empty()) g.error = what;
  for (;;) yield();
}

void barrier(int id, int threads) {
  if (id < 0 || id >= 16) fail("barrier id out of range");
  wait_on(g.bars[id], threads == 0 ? int(g.block.x * g.block.y * g.block.z) : threads);
}

const unsigned char* warp_exchange(const void* mine, int bytes) {
  Fiber& f = *g.cur;
  Warp& w = g.warps[f.linear / 32];
  const int lane = f.linear % 32, parity = int(f.collectives++ & 1);
  std::memcpy(w.slots[parity][lane], mine, bytes);
  wait_on(w.bar, 32);
  return &w.slots[parity][0][0];
}

void warp_allgather(const void* mine, int bytes, void* all) {
  const unsigned char* slots = warp_exchange(mine, bytes);
  for (int l = 0; l < 32; ++l) std::memcpy(static_cast<unsigned char*>(all) + l * bytes, slots + l * 64, bytes);
}

unsigned char* warp_once(bool* first) {
  Fiber& f = *g.cur;
  Warp& w = g.warps[f.linear / 32];
  const uint64_t tag = f.collectives - 1;  // index of the collective this lane just passed
  const int parity = int(tag & 1);
  *first = w.once_tag[parity] != tag;
  w.once_tag[parity] = tag;
  return w.once[parity];
}

void syncwarp() {
  uint32_t all[32], zero = 0;
  warp_allgather(&zero, 4, all);
}

uint32_t shfl_xor(uint32_t v, int lane_mask) {
  uint32_t all[32];
  warp_allgather(&v, 4, all);
  return all[(lane_id() ^ lane_mask) & 31];
}

unsigned char* dynamic_smem() { return g.smem.data(); }

uint32_t smem_offset(const void* p) {
  const auto* c = static_cast<const unsigned char*>(p);
  if (c < g.smem.data() || c > g.smem.data() + g.smem_bytes) fail("shared-memory address outside the launch's shared memory");
  return uint32_t(c - g.smem.data());
}

unsigned char* smem_at(uint32_t offset, int bytes) {
  if (size_t(offset) + bytes > g.smem_bytes) fail("shared-memory access out of bounds");
  return g.smem.data() + offset;
}

void cp_async(uint32_t dst, const void* src, int bytes, int src_bytes) {
  smem_at(dst, bytes);
  if (dst % bytes != 0) fail("cp.async destination misaligned");
  if (src_bytes > 0 && reinterpret_cast<uintptr_t>(src) % bytes != 0) fail("cp.async source misaligned");
  g.cur->open.push_back({dst, static_cast<const unsigned char*>(src), bytes, src_bytes});
}

void cp_async_commit() {
  Fiber& f = *g.cur;
  f.groups.push_back(std::move(f.open));
  f.open.clear();
}

void cp_async_wait(int pending_groups_allowed) {
  Fiber& f = *g.cur;
  while (int(f.groups.size()) > pending_groups_allowed) {
    for (auto& c : f.groups.front()) perform(c);
    f.groups.pop_front();
  }
}

int device_attribute(int attr) {
  auto env = [](const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v ? std::atoi(v) : fallback;
  };
  if (attr == cudaDevAttrMultiProcessorCount) return env("SINKOPS_EMU_SM_COUNT", 132);
  if (attr == cudaDevAttrMaxSharedMemoryPerBlockOptin) return env("SINKOPS_EMU_SMEM_OPTIN", 232448);
  // An sm_80 device: the emulator runs the portable kernels (it has no sm_90a ones).
  if (attr == cudaDevAttrComputeCapabilityMajor) return 8;
  if (attr == cudaDevAttrComputeCapabilityMinor) return 0;
  return 0;
}

void run_grid(const dim3& grid, const dim3& block, size_t smem_bytes, const std::function<void()>& body) {
  std::lock_guard<std::mutex> lock(g_launch_mutex);
  if (smem_bytes > size_t(device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin)))
    throw std::runtime_error("CUDA emulator: launch asks for more shared memory than the device has");
  g.grid = grid;
  g.block = block;
  g.smem_bytes = smem_bytes;
  g.smem.assign(smem_bytes + 16, 0);
  g.body = &body;
  g.error.clear();
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        g.bidx = dim3(x, y, z);
        run_cta();
        if (!g.error.empty()) {
          const std::string msg = "CUDA emulator: " + g.error + " (block " + std::to_string(x) + "," +
                                  std::to_string(y) + "," + std::to_string(z) + ")";
          g.error.clear();
          throw std::runtime_error(msg);
        }
      }
}

}  // namespace sinkops_emu

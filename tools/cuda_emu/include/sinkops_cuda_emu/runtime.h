// The CPU emulator's execution model (tools/cuda_emu/README.md). A launch runs its CTAs one
// after another; a CTA's threads are cooperative fibers on one OS thread, switched only at
// barriers and warp collectives, so shared memory is a plain buffer and there are no data
// races in the emulator itself. What it checks: every shared-memory access made through the
// PTX wrappers is in bounds; cp.async data lands only at the wait that covers it (a missing
// wait reads stale bytes); fresh shared memory is NaN-poisoned; barriers that can never
// complete (divergent __syncthreads, a lane missing from a warp collective) raise an error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

struct dim3;

namespace sinkops_emu {

const dim3& thread_idx();
const dim3& block_idx();
const dim3& block_dim();
const dim3& grid_dim();
int lane_id();

// bar.sync id, threads (threads == 0: the whole CTA, i.e. __syncthreads).
void barrier(int id, int threads);
void syncwarp();
uint32_t shfl_xor(uint32_t v, int lane_mask);
// Warp collective: every lane passes `bytes` (<= 64) of its own; `all` receives 32 x `bytes`,
// lane-major. All 32 lanes of the warp must call it (like the .aligned PTX it stands for).
void warp_allgather(const void* mine, int bytes, void* all);
// The same without copying: the 32 lanes' contributions, 64 bytes apart, valid until this lane's
// next warp collective.
const unsigned char* warp_exchange(const void* mine, int bytes);
// Per-warp scratch (8 KiB) for the collective just exchanged; *first is true for the one lane
// that should fill it (the others then read it): work shared by all lanes is done once.
unsigned char* warp_once(bool* first);

// Shared memory of the running CTA: offsets are this window's "shared addresses".
unsigned char* dynamic_smem();
uint32_t smem_offset(const void* p);
unsigned char* smem_at(uint32_t offset, int bytes);  // checked: [offset, offset + bytes) in the window

// cp.async as queued copies of this thread: they land at the cp_async_wait that covers them.
void cp_async(uint32_t dst_offset, const void* src, int bytes, int src_bytes);
void cp_async_commit();
void cp_async_wait(int pending_groups_allowed);

int device_attribute(int attr);
[[noreturn]] void fail(const char* what);  // stops the launch with a RuntimeError naming `what`  // SM count 132, 227 KB opt-in smem; SINKOPS_EMU_* env overrides

void run_grid(const dim3& grid, const dim3& block, size_t smem_bytes, const std::function<void()>& body);

}  // namespace sinkops_emu

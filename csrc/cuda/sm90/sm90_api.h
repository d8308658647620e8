// The sm_90a kernels' entry points, called by the portable launchers in csrc/cuda/ when the
// build has them (SINKOPS_SM90, set by tools/build_cuda.py) and the device is a Hopper GPU.
// The caller has validated the params (the same checks as the sm80 path).
#pragma once
#include "sinkops/sparse_mla_params.h"

namespace sinkops::cuda::sm90 {

// csrc/cuda/sm90/sparse_mla_prefill_sm90.cu: any h_q (64-head tiles), d_qk 512 or 576, d_v 512;
// out 16-byte aligned (rows are stored in 16-byte chunks).
int sparse_mla_prefill_smem_bytes(int d_qk);
void sparse_mla_prefill(const SparseMlaPrefillParams& params, void* stream);

}  // namespace sinkops::cuda::sm90

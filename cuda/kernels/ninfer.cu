// ninfer CUDA kernels: the one translation unit compiled to cuda/ninfer.ptx
// (sm_80 PTX, JIT-compiled by the driver) with
//
//   nvcc -arch=compute_80 -code=compute_80 -O3 -ptx -o cuda/ninfer.ptx cuda/kernels/ninfer.cu
//
// Every kernel is extern "C"; its contract (parameters, grid, semantics) is
// the comment above it. cuda/kernels.go launches them with the geometry of
// cuda/geometry.go. All pointers are device addresses; kernels allocate
// nothing and never synchronise with the host, so a step can be captured
// into a CUDA Graph.

#include "common.cuh"
#include "matmul.cuh"
#include "kquant.cuh"
#include "kv.cuh"
#include "attention.cuh"
#include "elementwise.cuh"
#include "hybrid.cuh"
#include "moe.cuh"
#include "sample.cuh"

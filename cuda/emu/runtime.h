// The emulator's launch interface (runtime.cc), used by the driver.

#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cuda_emu.h"

namespace emu {

// max_shared_bytes is the dynamic shared memory a launch may ask for (the
// limit without the opt-in attribute, as cuda/geometry.go maxSharedBytes).
constexpr size_t max_shared_bytes = 48 << 10;

// max_block_threads is the most threads of a block.
constexpr int max_block_threads = 1024;

// launch_config is the geometry of one launch.
struct launch_config {
    dim3 grid, block;
    size_t shared; // dynamic shared memory, bytes
};

// run executes body(ctx) once in every thread of every block of c, blocks in
// order (x fastest), a block's threads as cooperative fibers. Errors the
// emulator detects abort the process through fail. name labels reports.
void run(const char* name, const launch_config& c, void (*body)(void* ctx), void* ctx);

} // namespace emu

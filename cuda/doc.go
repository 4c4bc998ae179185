// Package cuda is the CUDA backend, built with the cuda build tag: weights
// and the paged KV cache live in device memory, each recorded graph runs as
// kernels on one stream, and a decode (or verify) step of up to 256 rows is
// padded to a row bucket, captured once per bucket as a CUDA Graph and
// replayed.
//
// Files without the build tag hold the pure-Go parts (row buckets, batch
// padding, capture keys, device buffer layout, launch geometry) so that
// they are tested on every machine; everything that calls the driver is
// behind //go:build cuda, because gorgonia.org/cu initialises the driver
// when it is loaded and exits the process where there is no GPU.
//
// Without a GPU, `just cuda-emu` (the cudaemu build tag) compiles the
// unmodified kernels with the host C++ compiler, runs them in the emulator
// of cuda/emu under AddressSanitizer and UndefinedBehaviorSanitizer through
// the launches of launch.go, and compares every kernel with the CPU backend;
// cuda/emu/cuda_emu.h says what that cannot see.
package cuda

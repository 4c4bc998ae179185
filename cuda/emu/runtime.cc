// The emulator's execution model (see cuda_emu.h): blocks one after the
// other, a block's threads as cooperative fibers on the calling host thread,
// switched only at __syncthreads, __syncwarp and the warp intrinsics.
//
// Fibers switch with a few instructions of assembly (x86-64 System V), not
// swapcontext: that makes a system call per switch and AddressSanitizer's
// interceptor for it clears the shadow of the whole target stack. Switches
// are annotated for AddressSanitizer (__sanitizer_start_switch_fiber /
// __sanitizer_finish_switch_fiber) so that it knows which stack is live.

#include "runtime.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif

#if defined(EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#error "cuda emulator: fiber switching is written for x86-64 only"
#endif

// emu_switch saves the callee-saved registers on the current stack, stores
// the stack pointer in *save and resumes the stack at next. A new fiber's
// stack is laid out (fiber_init) so that it resumes in emu_fiber_start,
// which calls r13(r12) and never returns.
extern "C" void emu_switch(void** save, void* next);
extern "C" void emu_fiber_start();
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch

    .globl emu_fiber_start
    .type emu_fiber_start, @function
emu_fiber_start:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size emu_fiber_start, .-emu_fiber_start
    .section .note.GNU-stack,"",@progbits
    .text
)");

// smem is the dynamic shared memory of the kernels
// (`extern __shared__ float smem[]`), one per host thread.
alignas(16) thread_local float smem[emu::max_shared_bytes / 4];

namespace emu {

thread_local thread* cur;
thread_local uint3 blockIdx_;
thread_local dim3 blockDim_;
thread_local dim3 gridDim_;

namespace {

constexpr size_t stack_bytes = 256 << 10;
constexpr size_t guard_bytes = 4096;

enum wait_kind { running, at_barrier, at_warp, exited };

struct fiber {
    thread t;
    void* sp = nullptr;
    char* stack = nullptr; // lowest usable byte
    wait_kind state = running;
    bool stalled = false; // resumed and found its wait unsatisfied
    unsigned waitOp = 0;  // the warp intrinsic it waits at
    const char* waitWhat = "";
#if defined(EMU_ASAN)
    void* fake = nullptr;
#endif
};

// warp_slots are a warp's deposits for its intrinsics, double-buffered by
// the parity of the intrinsic's index: intrinsic k+2 of a lane can only
// start after every lane has finished intrinsic k+1, so after every lane
// has read k.
struct warp_slots {
    uint64_t val[2][32];
    unsigned tag[2][32];  // intrinsic index deposited, ~0u for none yet
    unsigned mask[2][32]; // its mask
};

struct block_state {
    std::vector<fiber> fibers;
    std::vector<warp_slots> warps;
    int threads = 0;
    int lastWarpLanes = 32;
    int arrived = 0;   // at the barrier of generation gen
    unsigned gen = 0;
    int exitedCount = 0;
    void* schedSP = nullptr;
    const char* kernel = "";
    void (*body)(void*) = nullptr;
    void* ctx = nullptr;
#if defined(EMU_ASAN)
    void* schedFake = nullptr;
    const void* schedBottom = nullptr;
    size_t schedSize = 0;
#endif
};

thread_local block_state* blk;
thread_local fiber* curFiber;
thread_local char* stackPool;
thread_local size_t stackPoolFibers;

char* fiber_stack(size_t i) {
    if (i >= stackPoolFibers) {
        const size_t n = max_block_threads;
        const size_t per = stack_bytes + guard_bytes;
        void* p = mmap(nullptr, n * per, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "cuda emulator: cannot map %zu fiber stacks\n", n);
            abort();
        }
        for (size_t k = 0; k < n; k++) {
            if (mprotect((char*)p + k * per, guard_bytes, PROT_NONE) != 0) {
                fprintf(stderr, "cuda emulator: cannot protect a stack guard page\n");
                abort();
            }
        }
        stackPool = (char*)p;
        stackPoolFibers = n;
    }
    return stackPool + i * (stack_bytes + guard_bytes) + guard_bytes;
}

// switch_to_fiber runs f until it yields or exits (scheduler side).
void switch_to_fiber(fiber* f) {
    curFiber = f;
    cur = &f->t;
#if defined(EMU_ASAN)
    __sanitizer_start_switch_fiber(&blk->schedFake, f->stack, stack_bytes);
#endif
    emu_switch(&blk->schedSP, f->sp);
#if defined(EMU_ASAN)
    __sanitizer_finish_switch_fiber(blk->schedFake, nullptr, nullptr);
#endif
    cur = nullptr;
    curFiber = nullptr;
}

// yield returns to the scheduler (fiber side).
void yield() {
    fiber* f = curFiber;
#if defined(EMU_ASAN)
    __sanitizer_start_switch_fiber(&f->fake, blk->schedBottom, blk->schedSize);
#endif
    emu_switch(&f->sp, blk->schedSP);
#if defined(EMU_ASAN)
    __sanitizer_finish_switch_fiber(f->fake, nullptr, nullptr);
#endif
}

void fiber_main(void* arg) {
    fiber* f = (fiber*)arg;
#if defined(EMU_ASAN)
    __sanitizer_finish_switch_fiber(nullptr, &blk->schedBottom, &blk->schedSize);
#endif
    blk->body(blk->ctx);
    if (blk->arrived > 0) {
        fail("thread exits while %d threads of the block wait at __syncthreads", blk->arrived);
    }
    f->state = exited;
    blk->exitedCount++;
#if defined(EMU_ASAN)
    __sanitizer_start_switch_fiber(nullptr, blk->schedBottom, blk->schedSize);
#endif
    emu_switch(&f->sp, blk->schedSP);
    abort(); // an exited fiber is never resumed
}

void fiber_init(fiber* f, size_t i) {
    f->stack = fiber_stack(i);
    uintptr_t top = ((uintptr_t)(f->stack + stack_bytes)) & ~(uintptr_t)15;
    void** sp = (void**)(top - 72);
    sp[0] = nullptr;                    // r15
    sp[1] = nullptr;                    // r14
    sp[2] = (void*)&fiber_main;         // r13: the function
    sp[3] = f;                          // r12: its argument
    sp[4] = nullptr;                    // rbx
    sp[5] = nullptr;                    // rbp: ends frame-pointer backtraces
    sp[6] = (void*)&emu_fiber_start;    // return address
    f->sp = sp;
    f->state = running;
    f->stalled = false;
#if defined(EMU_ASAN)
    f->fake = nullptr;
#endif
}

const char* state_name(wait_kind k) {
    switch (k) {
    case running:
        return "running";
    case at_barrier:
        return "at __syncthreads";
    case at_warp:
        return "at a warp intrinsic";
    case exited:
        return "exited";
    }
    return "?";
}

[[noreturn]] void deadlock() {
    fprintf(stderr, "cuda emulator: %s: block (%u,%u,%u) deadlocks:\n", blk->kernel, blockIdx_.x, blockIdx_.y,
            blockIdx_.z);
    int shown = 0;
    for (const fiber& f : blk->fibers) {
        if (shown < 64) {
            fprintf(stderr, "  thread %d (warp %d lane %d): %s", f.t.linear, f.t.warp, f.t.lane, state_name(f.state));
            if (f.state == at_warp) {
                fprintf(stderr, " %s #%u", f.waitWhat, f.waitOp);
            }
            fprintf(stderr, "\n");
        }
        shown++;
    }
    abort();
}

} // namespace

void fail(const char* fmt, ...) {
    fprintf(stderr, "cuda emulator: %s: ", blk ? blk->kernel : "?");
    if (cur != nullptr) {
        fprintf(stderr, "block (%u,%u,%u) thread (%u,%u,%u): ", blockIdx_.x, blockIdx_.y, blockIdx_.z, cur->idx.x,
                cur->idx.y, cur->idx.z);
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    abort();
}

void syncthreads() {
    fiber* f = curFiber;
    if (f == nullptr) {
        fail("__syncthreads outside a kernel");
    }
    if (blk->exitedCount > 0) {
        fail("__syncthreads after %d threads of the block exited (undefined on the GPU)", blk->exitedCount);
    }
    const unsigned g = blk->gen;
    if (++blk->arrived == blk->threads) {
        blk->arrived = 0;
        blk->gen++;
        return;
    }
    f->state = at_barrier;
    f->stalled = false;
    do {
        yield();
        if (blk->exitedCount > 0 && blk->gen == g) {
            fail("__syncthreads that %d exited threads of the block never reach", blk->exitedCount);
        }
        f->stalled = true;
    } while (blk->gen == g);
    f->state = running;
}

const uint64_t* warp_exchange(unsigned mask, uint64_t mine, const char* what) {
    fiber* f = curFiber;
    if (f == nullptr) {
        fail("%s outside a kernel", what);
    }
    thread& t = f->t;
    if (!((mask >> t.lane) & 1u)) {
        fail("%s: mask 0x%08x does not name the calling lane %d", what, mask, t.lane);
    }
    const bool last = t.warp == (int)blk->warps.size() - 1;
    if (last && blk->lastWarpLanes < 32 && (mask >> blk->lastWarpLanes) != 0) {
        fail("%s: mask 0x%08x names lanes past the %d threads of the last warp", what, mask, blk->lastWarpLanes);
    }
    warp_slots& w = blk->warps[t.warp];
    const unsigned k = t.warpOps++;
    const int b = k & 1;
    w.val[b][t.lane] = mine;
    w.mask[b][t.lane] = mask;
    w.tag[b][t.lane] = k;
    const int base = t.warp * 32;
    f->state = at_warp;
    f->waitOp = k;
    f->waitWhat = what;
    f->stalled = false;
    for (;;) {
        bool ready = true;
        for (int l = 0; l < 32; l++) {
            if (!((mask >> l) & 1u)) {
                continue;
            }
            if (w.tag[b][l] == k) {
                if (w.mask[b][l] != mask) {
                    fail("%s #%u: lanes %d and %d name different masks (0x%08x, 0x%08x)", what, k, t.lane, l, mask,
                         w.mask[b][l]);
                }
                continue;
            }
            ready = false;
            if (blk->fibers[base + l].state == exited) {
                fail("%s #%u: mask 0x%08x names lane %d, which has exited", what, k, mask, l);
            }
        }
        if (ready) {
            break;
        }
        yield();
        f->stalled = true;
    }
    f->state = running;
    return w.val[b];
}

void run(const char* name, const launch_config& c, void (*body)(void*), void* ctx) {
    const int threads = (int)(c.block.x * c.block.y * c.block.z);
    if (threads < 1 || threads > max_block_threads || c.grid.x < 1 || c.grid.y < 1 || c.grid.z < 1) {
        fprintf(stderr, "cuda emulator: %s: bad launch grid (%u,%u,%u) block (%u,%u,%u)\n", name, c.grid.x, c.grid.y,
                c.grid.z, c.block.x, c.block.y, c.block.z);
        abort();
    }
    if (c.shared > max_shared_bytes) {
        fprintf(stderr, "cuda emulator: %s: %zu bytes of dynamic shared memory (max %zu)\n", name, c.shared,
                max_shared_bytes);
        abort();
    }
    block_state bs;
    bs.kernel = name;
    bs.body = body;
    bs.ctx = ctx;
    bs.threads = threads;
    bs.fibers.resize(threads);
    bs.warps.resize((threads + 31) / 32);
    bs.lastWarpLanes = threads - 32 * ((int)bs.warps.size() - 1);
    blk = &bs;
    gridDim_ = c.grid;
    blockDim_ = c.block;
#if defined(EMU_ASAN)
    // Bytes past the launch's dynamic shared memory are out of bounds.
    const size_t sh = (c.shared + 7) & ~(size_t)7;
    ASAN_POISON_MEMORY_REGION((char*)smem + sh, sizeof(smem) - sh);
#endif
    for (unsigned bz = 0; bz < c.grid.z; bz++) {
        for (unsigned by = 0; by < c.grid.y; by++) {
            for (unsigned bx = 0; bx < c.grid.x; bx++) {
                blockIdx_ = uint3{bx, by, bz};
                memset(smem, 0xff, c.shared); // unwritten shared memory reads as NaN / -1
                for (int i = 0; i < threads; i++) {
                    fiber& f = bs.fibers[i];
                    fiber_init(&f, i);
                    f.t.idx = uint3{(unsigned)i % c.block.x, ((unsigned)i / c.block.x) % c.block.y,
                                    (unsigned)i / (c.block.x * c.block.y)};
                    f.t.linear = i;
                    f.t.lane = i & 31;
                    f.t.warp = i >> 5;
                    f.t.warpOps = 0;
                }
                for (warp_slots& w : bs.warps) {
                    memset(w.tag, 0xff, sizeof w.tag);
                }
                bs.arrived = 0;
                bs.exitedCount = 0;
                int live = threads;
                while (live > 0) {
                    bool progress = false;
                    live = 0;
                    for (int i = 0; i < threads; i++) {
                        fiber& f = bs.fibers[i];
                        if (f.state == exited) {
                            continue;
                        }
                        switch_to_fiber(&f);
                        if (f.state == exited || !f.stalled) {
                            progress = true;
                        }
                        if (f.state != exited) {
                            live++;
                        }
                    }
                    if (live > 0 && !progress) {
                        deadlock();
                    }
                }
            }
        }
    }
#if defined(EMU_ASAN)
    ASAN_UNPOISON_MEMORY_REGION((char*)smem + sh, sizeof(smem) - sh);
#endif
    blk = nullptr;
}

} // namespace emu

// cuda-emu: runs the emulated ninfer kernels for the Go parity test
// (cuda/emu_test.go), which talks to it over stdin and stdout:
//
//   request  u32 op: 1 launch, 2 list, 3 quit
//   launch   u16 n, name[n]; u32 grid[3], block[3], shared;
//            u32 nbuf, then per buffer: u64 device address, u64 size,
//            u8 copy back, data[size];
//            u32 nargs, u64 args[nargs] (the boxes the CUDA driver would get)
//   reply    u32 0, then the data of every copy-back buffer in order
//   list     reply u32 count, then per kernel u16 n, name[n], u16 m, sig[m]
//
// All little-endian. A pointer argument is a device address inside one of
// the buffers (or 0); the kernel gets the host address at the same offset of
// a host copy allocated at exactly the buffer's size with the device
// address's alignment (256), so AddressSanitizer sees any access past it.
// An error the emulator or a sanitizer detects is printed on stderr and
// ends the process with a non-zero status.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "registry.h"
#include "runtime.h"

namespace {

[[noreturn]] void die(const char* msg) {
    fprintf(stderr, "cuda-emu: %s\n", msg);
    exit(2);
}

void read_exact(void* p, size_t n) {
    if (n > 0 && fread(p, 1, n, stdin) != n) {
        die("short read on stdin");
    }
}

template <class T>
T rd() {
    T v;
    read_exact(&v, sizeof v);
    return v;
}

void write_exact(const void* p, size_t n) {
    if (n > 0 && fwrite(p, 1, n, stdout) != n) {
        die("short write on stdout");
    }
}

template <class T>
void wr(T v) {
    write_exact(&v, sizeof v);
}

struct buffer {
    uint64_t dev, size;
    bool back;
    unsigned char* host;
};

struct call_ctx {
    const emu::kernel_entry* k;
    const uint64_t* args;
};

void body(void* p) {
    const call_ctx* c = (const call_ctx*)p;
    c->k->call(c->k->fn, c->args);
}

const emu::kernel_entry* find(const std::string& name) {
    for (int i = 0; i < emu::kernel_count; i++) {
        if (name == emu::kernels[i].name) {
            return &emu::kernels[i];
        }
    }
    return nullptr;
}

void launch() {
    const uint16_t n = rd<uint16_t>();
    std::string name(n, '\0');
    read_exact(&name[0], n);
    emu::launch_config c;
    c.grid = dim3{rd<uint32_t>(), rd<uint32_t>(), rd<uint32_t>()};
    c.block = dim3{rd<uint32_t>(), rd<uint32_t>(), rd<uint32_t>()};
    c.shared = rd<uint32_t>();
    std::vector<buffer> bufs(rd<uint32_t>());
    for (buffer& b : bufs) {
        b.dev = rd<uint64_t>();
        b.size = rd<uint64_t>();
        b.back = rd<uint8_t>() != 0;
        if (b.dev % 256 != 0) {
            die("device address not 256-byte aligned");
        }
        void* h = nullptr;
        if (posix_memalign(&h, 256, b.size > 0 ? b.size : 1) != 0) {
            die("out of memory");
        }
        b.host = (unsigned char*)h;
        read_exact(b.host, b.size);
    }
    std::vector<uint64_t> args(rd<uint32_t>());
    for (uint64_t& a : args) {
        a = rd<uint64_t>();
    }
    const emu::kernel_entry* k = find(name);
    if (k == nullptr) {
        fprintf(stderr, "cuda-emu: no kernel %s\n", name.c_str());
        exit(2);
    }
    if (strlen(k->sig) != args.size()) {
        fprintf(stderr, "cuda-emu: %s takes %zu parameters, launched with %zu\n", name.c_str(), strlen(k->sig),
                args.size());
        exit(2);
    }
    for (size_t i = 0; i < args.size(); i++) {
        if (k->sig[i] != 'p' || args[i] == 0) {
            continue;
        }
        bool ok = false;
        for (const buffer& b : bufs) {
            if (args[i] >= b.dev && args[i] <= b.dev + b.size) {
                args[i] = (uint64_t)(uintptr_t)(b.host + (args[i] - b.dev));
                ok = true;
                break;
            }
        }
        if (!ok) {
            fprintf(stderr, "cuda-emu: %s: parameter %zu: address 0x%llx is in no buffer\n", name.c_str(), i,
                    (unsigned long long)args[i]);
            exit(2);
        }
    }
    call_ctx ctx{k, args.data()};
    emu::run(k->name, c, body, &ctx);
    wr<uint32_t>(0);
    for (buffer& b : bufs) {
        if (b.back) {
            write_exact(b.host, b.size);
        }
        free(b.host);
    }
    fflush(stdout);
}

void list() {
    wr<uint32_t>(emu::kernel_count);
    for (int i = 0; i < emu::kernel_count; i++) {
        const emu::kernel_entry& k = emu::kernels[i];
        wr<uint16_t>(strlen(k.name));
        write_exact(k.name, strlen(k.name));
        wr<uint16_t>(strlen(k.sig));
        write_exact(k.sig, strlen(k.sig));
    }
    fflush(stdout);
}

} // namespace

int main() {
    for (;;) {
        uint32_t op;
        if (fread(&op, 1, 4, stdin) != 4) {
            return 0; // stdin closed
        }
        switch (op) {
        case 1:
            launch();
            break;
        case 2:
            list();
            break;
        case 3:
            return 0;
        default:
            die("unknown request");
        }
    }
}

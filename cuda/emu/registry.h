// The table of emulated kernels: each kernel's name, its parameter kinds
// and a trampoline that calls it with boxed arguments.

#pragma once

#include <stdint.h>

#include <type_traits>
#include <utility>

namespace emu {

// kernel_entry is one kernel. sig has one letter per parameter: 'p' a
// pointer, 'i' a 32-bit integer, 'l' a 64-bit integer, 'f' a float.
struct kernel_entry {
    const char* name;
    const char* sig;
    void (*fn)();                               // the kernel, type-erased
    void (*call)(void (*fn)(), const uint64_t*); // calls fn with unboxed args
};

template <class T>
constexpr char sig_letter() {
    static_assert(std::is_pointer<T>::value || std::is_same<T, int>::value || std::is_same<T, long long>::value ||
                      std::is_same<T, float>::value,
                  "kernel parameter type not supported by the emulator");
    return std::is_pointer<T>::value ? 'p' : std::is_same<T, int>::value ? 'i' : std::is_same<T, float>::value ? 'f' : 'l';
}

template <class... A>
struct signature {
    static constexpr char str[sizeof...(A) + 1] = {sig_letter<A>()..., 0};
};

// unbox reads a parameter from its 8-byte box as the driver does: the low
// bytes at the parameter's size. Pointer boxes already hold host addresses.
template <class T>
T unbox(uint64_t v) {
    if constexpr (std::is_pointer<T>::value) {
        return reinterpret_cast<T>((uintptr_t)v);
    } else if constexpr (std::is_same<T, float>::value) {
        const uint32_t b = (uint32_t)v;
        float f;
        memcpy(&f, &b, 4);
        return f;
    } else if constexpr (std::is_same<T, int>::value) {
        return (int)(uint32_t)v;
    } else {
        return (long long)v;
    }
}

template <class... A, size_t... I>
void call_with(void (*f)(A...), const uint64_t* args, std::index_sequence<I...>) {
    f(unbox<A>(args[I])...);
}

template <class... A>
void trampoline(void (*fn)(), const uint64_t* args) {
    call_with(reinterpret_cast<void (*)(A...)>(fn), args, std::index_sequence_for<A...>{});
}

template <class... A>
kernel_entry make_entry(const char* name, void (*f)(A...)) {
    return kernel_entry{name, signature<A...>::str, reinterpret_cast<void (*)()>(f), &trampoline<A...>};
}

// kernels and kernel_count are the table (kernels.cc).
extern const kernel_entry kernels[];
extern const int kernel_count;

} // namespace emu

//go:build unix

package weights

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"
)

// Open maps the GGUF file at path read-only into memory and parses it as
// Parse does (errors are *FormatError for malformed content, or the
// os/syscall error for I/O problems). Tensor Data points into the mapping,
// which stays valid until Close. Pages are read on first touch and shared
// with the page cache: the choice for backends that copy the weights
// elsewhere (a GPU) or processes that share one model file.
func Open(path string) (*File, error) {
	fd, size, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	if size == 0 {
		return Parse(nil, path)
	}
	data, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: mmap: %w", path, err)
	}
	return parseOwned(data, data, path)
}

// hugePage is the transparent huge page size Load aligns its memory to.
const hugePage = 2 << 20

// Load reads the GGUF file at path into private memory and parses it as
// Open does. The memory is 2 MiB aligned and, on Linux, advised for
// transparent huge pages: a backend that streams every weight from host
// memory each decode step (the CPU) then takes one TLB miss per 2 MiB
// rather than per 4 KiB, which decode pays for in bandwidth. The whole file
// is resident until Close.
func Load(path string) (*File, error) {
	fd, size, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	if size == 0 {
		return Parse(nil, path)
	}
	// Over-allocate by one huge page so the data can start on a boundary.
	region, err := syscall.Mmap(-1, 0, int(size)+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: allocating %d bytes: %w", path, size, err)
	}
	skip := 0
	if rem := int(uintptr(unsafe.Pointer(&region[0])) % hugePage); rem != 0 {
		skip = hugePage - rem
	}
	data := region[skip : skip+int(size)]
	adviseHugePages(data)
	if _, err := io.ReadFull(fd, data); err != nil {
		syscall.Munmap(region)
		return nil, fmt.Errorf("gguf %s: read: %w", path, err)
	}
	return parseOwned(data, region, path)
}

// openRegular opens path and returns its size, failing for anything but a
// regular file whose size fits in an int.
func openRegular(path string) (*os.File, int64, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		fd.Close()
		return nil, 0, fmt.Errorf("gguf %s: not a regular file", path)
	}
	size := st.Size()
	if int64(int(size)) != size {
		fd.Close()
		return nil, 0, fmt.Errorf("gguf %s: file of %d bytes is too large to map", path, size)
	}
	return fd, size, nil
}

// parseOwned parses data, which lies in the mapping region; the File
// unmaps region on Close, and at once if data does not parse.
func parseOwned(data, region []byte, path string) (*File, error) {
	f, err := Parse(data, path)
	if err != nil {
		syscall.Munmap(region)
		return nil, err
	}
	f.unmap = func() error { return syscall.Munmap(region) }
	return f, nil
}

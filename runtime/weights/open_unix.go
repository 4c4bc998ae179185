//go:build unix

package weights

import (
	"fmt"
	"os"
	"syscall"
)

// Open maps the GGUF file at path read-only into memory and parses it as
// Parse does (errors are *FormatError for malformed content, or the
// os/syscall error for I/O problems). Tensor Data points into the mapping,
// which stays valid until Close.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf %s: not a regular file", path)
	}
	size := st.Size()
	if size == 0 {
		return Parse(nil, path)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("gguf %s: file of %d bytes is too large to map", path, size)
	}
	data, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: mmap: %w", path, err)
	}
	f, err := Parse(data, path)
	if err != nil {
		syscall.Munmap(data)
		return nil, err
	}
	f.unmap = func() error { return syscall.Munmap(data) }
	return f, nil
}

//go:build unix

package weights

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"
)

// mapFile returns the bytes of the regular file at path, mapped read-only
// (load false) or read into private 2 MiB aligned memory advised for huge
// pages (load true, as Load does for GGUF), and the function that releases
// them.
func mapFile(path string, load bool) ([]byte, func() error, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	switch {
	case !st.Mode().IsRegular():
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	case int64(int(size)) != size:
		return nil, nil, fmt.Errorf("%s: file of %d bytes is too large to map", path, size)
	case size == 0:
		return nil, func() error { return nil }, nil
	}
	if !load {
		data, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: mmap: %w", path, err)
		}
		return data, func() error { return syscall.Munmap(data) }, nil
	}
	region, err := syscall.Mmap(-1, 0, int(size)+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: allocating %d bytes: %w", path, size, err)
	}
	skip := 0
	if rem := int(uintptr(unsafe.Pointer(&region[0])) % hugePage); rem != 0 {
		skip = hugePage - rem
	}
	data := region[skip : skip+int(size)]
	adviseHugePages(data)
	if _, err := io.ReadFull(fd, data); err != nil {
		syscall.Munmap(region)
		return nil, nil, fmt.Errorf("%s: read: %w", path, err)
	}
	return data, func() error { return syscall.Munmap(region) }, nil
}

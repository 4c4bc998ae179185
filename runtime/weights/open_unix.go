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
	label := "gguf " + path
	fd, size, err := openRegular(path, label)
	if err != nil {
		return nil, folderError(path, err)
	}
	defer fd.Close()
	if size == 0 {
		return Parse(nil, path)
	}
	data, err := mapShared(fd, size, label)
	if err != nil {
		return nil, err
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
	label := "gguf " + path
	fd, size, err := openRegular(path, label)
	if err != nil {
		return nil, folderError(path, err)
	}
	defer fd.Close()
	if size == 0 {
		return Parse(nil, path)
	}
	data, region, err := readAligned(fd, size, label)
	if err != nil {
		return nil, err
	}
	f, err := parseOwned(data, region, path)
	if err != nil {
		return nil, err
	}
	f.private = true
	return f, nil
}

// openRegular opens path, which must be a regular file whose size fits an
// int; label prefixes its errors.
func openRegular(path, label string) (*os.File, int64, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, 0, err
	}
	if st.IsDir() {
		fd.Close()
		return nil, 0, fmt.Errorf("%s: %w", label, errFolder)
	}
	if !st.Mode().IsRegular() {
		fd.Close()
		return nil, 0, fmt.Errorf("%s: not a regular file", label)
	}
	size := st.Size()
	if int64(int(size)) != size {
		fd.Close()
		return nil, 0, fmt.Errorf("%s: file of %d bytes is too large to map", label, size)
	}
	return fd, size, nil
}

// mapShared maps the size (> 0) bytes of fd read-only, shared with the page
// cache; label prefixes its errors.
func mapShared(fd *os.File, size int64, label string) ([]byte, error) {
	data, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", label, err)
	}
	return data, nil
}

// readAligned reads the size (> 0) bytes of fd into private memory that
// starts on a huge page boundary and is advised for huge pages. data lies
// in region, the mapping to unmap once data is no longer used; label
// prefixes its errors.
func readAligned(fd *os.File, size int64, label string) (data, region []byte, err error) {
	// Over-allocate by one huge page so the data can start on a boundary.
	region, err = syscall.Mmap(-1, 0, int(size)+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: allocating %d bytes: %w", label, size, err)
	}
	skip := 0
	if rem := int(uintptr(unsafe.Pointer(&region[0])) % hugePage); rem != 0 {
		skip = hugePage - rem
	}
	data = region[skip : skip+int(size)]
	adviseHugePages(data)
	if _, err := io.ReadFull(fd, data); err != nil {
		syscall.Munmap(region)
		return nil, nil, fmt.Errorf("%s: read: %w", label, err)
	}
	return data, region, nil
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

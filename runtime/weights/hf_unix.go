//go:build unix

package weights

import "syscall"

// mapFile returns the bytes of the regular file at path, mapped read-only
// (load false) or read into private 2 MiB aligned memory advised for huge
// pages (load true, as Load does for GGUF), and the function that releases
// them.
func mapFile(path string, load bool) ([]byte, func() error, error) {
	fd, size, err := openRegular(path, path)
	if err != nil {
		return nil, nil, err
	}
	defer fd.Close()
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	if !load {
		data, err := mapShared(fd, size, path)
		if err != nil {
			return nil, nil, err
		}
		return data, func() error { return syscall.Munmap(data) }, nil
	}
	data, region, err := readAligned(fd, size, path)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return syscall.Munmap(region) }, nil
}

//go:build !unix

package weights

import "os"

// mapFile reads the file at path into memory: this platform has no mapping.
func mapFile(path string, _ bool) ([]byte, func() error, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

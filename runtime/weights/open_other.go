//go:build !unix

package weights

import "os"

// Open reads the GGUF file at path into memory and parses it as Parse does
// (errors are *FormatError for malformed content, or the os error for I/O
// problems). On this platform there is no mapping; Close only clears Data.
func Open(path string) (*File, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, folderError(path, errFolder)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Load is Open on this platform: the file is read into memory either way.
func Load(path string) (*File, error) { return Open(path) }

//go:build unix && !linux

package weights

// adviseHugePages does nothing where there is no madvise(MADV_HUGEPAGE).
func adviseHugePages([]byte) {}

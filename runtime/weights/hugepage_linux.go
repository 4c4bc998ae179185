package weights

import "syscall"

// adviseHugePages asks the kernel to back b with transparent huge pages. It
// is advice: where THP is disabled the pages stay 4 KiB and nothing fails.
func adviseHugePages(b []byte) {
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE)
}

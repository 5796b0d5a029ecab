package numa

import (
	"errors"
	"syscall"
)

// sys is the part of the kernel the probe calls. Tests replace fields to
// see the probe degrade when the kernel refuses one.
type sys struct {
	// allowed is sched_getaffinity(0): the CPUs this process may run on.
	allowed func() ([]int, error)
	// pin is sched_setaffinity(0) of the calling, locked OS thread to
	// one CPU.
	pin func(cpu int) error
	// mmap maps n bytes of anonymous private memory; munmap unmaps it.
	mmap   func(n int) ([]byte, error)
	munmap func(b []byte) error
	// hugePages is madvise MADV_HUGEPAGE (on) or MADV_NOHUGEPAGE (off).
	hugePages func(b []byte, on bool) error
	// bind is mbind(MPOL_BIND) of b to one node.
	bind func(b []byte, node int) error
	// where is move_pages(0, n, pages, NULL, status, 0): the node of each
	// page at the given offsets of b, or a negative errno per page.
	where func(b []byte, offsets []int) ([]int32, error)
	// huge is how many bytes of b transparent huge pages back.
	huge func(b []byte) (int64, error)
}

// refused reports whether err is the kernel declining a call (no
// permission, not built in, not allowed by a cpuset or a seccomp filter)
// rather than a bug or a lack of memory.
func refused(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOSYS) ||
		errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EACCES) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, ErrNotSupported)
}

// ErrNotSupported is returned on systems without the Linux calls.
var ErrNotSupported = errors.New("numa: not supported on this system")

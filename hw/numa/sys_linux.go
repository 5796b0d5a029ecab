//go:build linux

package numa

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Memory policy modes of include/uapi/linux/mempolicy.h.
const mpolBind = 2

func linuxSys() sys {
	return sys{
		allowed: func() ([]int, error) {
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(0, &set); err != nil {
				return nil, fmt.Errorf("sched_getaffinity: %w", err)
			}
			var cpus []int
			for c := range len(set) * 64 {
				if set.IsSet(c) {
					cpus = append(cpus, c)
				}
			}
			return cpus, nil
		},
		pin: func(cpu int) error {
			var set unix.CPUSet
			if cpu < 0 || cpu >= len(set)*64 {
				return fmt.Errorf("sched_setaffinity CPU %d: beyond the %d CPUs of a cpu_set_t: %w", cpu, len(set)*64, unix.EINVAL)
			}
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				return fmt.Errorf("sched_setaffinity CPU %d: %w", cpu, err)
			}
			return nil
		},
		mmap: func(n int) ([]byte, error) {
			b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				return nil, fmt.Errorf("mmap %d bytes: %w", n, err)
			}
			return b, nil
		},
		munmap: unix.Munmap,
		hugePages: func(b []byte, on bool) error {
			adv := unix.MADV_NOHUGEPAGE
			if on {
				adv = unix.MADV_HUGEPAGE
			}
			if err := unix.Madvise(b, adv); err != nil {
				return fmt.Errorf("madvise: %w", err)
			}
			return nil
		},
		bind:  mbind,
		where: movePages,
		huge: func(b []byte) (int64, error) {
			f, err := os.Open("/proc/self/smaps")
			if err != nil {
				return 0, err
			}
			defer f.Close()
			return hugeBytesIn(f, addr(b))
		},
	}
}

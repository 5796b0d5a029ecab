//go:build !linux

package numa

func linuxSys() sys {
	no := func() error { return ErrNotSupported }
	return sys{
		allowed:   func() ([]int, error) { return nil, ErrNotSupported },
		pin:       func(int) error { return no() },
		mmap:      func(n int) ([]byte, error) { return make([]byte, n), nil },
		munmap:    func([]byte) error { return nil },
		hugePages: func([]byte, bool) error { return no() },
		bind:      func([]byte, int) error { return no() },
		where:     func([]byte, []int) ([]int32, error) { return nil, no() },
		huge:      func([]byte) (int64, error) { return 0, no() },
	}
}

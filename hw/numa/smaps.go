package numa

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// hugeBytesIn reads an smaps file (/proc/self/smaps) and returns the
// AnonHugePages of the mapping that starts at start: how much of it
// transparent huge pages back.
func hugeBytesIn(r io.Reader, start uintptr) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	in := false
	want := strconv.FormatUint(uint64(start), 16)
	for sc.Scan() {
		line := sc.Text()
		// A mapping's header is "start-end perms offset dev inode path";
		// its fields are "Name:   value kB".
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") {
			lo, _, _ := strings.Cut(f[0], "-")
			in = strings.TrimLeft(lo, "0") == want
			continue
		}
		if !in {
			continue
		}
		if f[0] == "AnonHugePages:" && len(f) > 1 {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("smaps: AnonHugePages %q: %w", f[1], err)
			}
			return n << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("smaps: %w", err)
	}
	return 0, fmt.Errorf("smaps: no AnonHugePages for the mapping at %#x", start)
}

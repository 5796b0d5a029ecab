package numa

import (
	"strings"
	"testing"
)

func TestHugeBytesIn(t *testing.T) {
	smaps := `55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
AnonHugePages:         0 kB
7f1200000000-7f1210000000 rw-p 00000000 00:00 0 
Size:             262144 kB
Rss:              262144 kB
AnonHugePages:    260096 kB
VmFlags: rd wr mr mw me ac sd hg
7ffd3a1e0000-7ffd3a201000 rw-p 00000000 00:00 0                          [stack]
AnonHugePages:         0 kB
`
	got, err := hugeBytesIn(strings.NewReader(smaps), 0x7f1200000000)
	if err != nil || got != 260096<<10 {
		t.Errorf("got %d, %v; want %d", got, err, 260096<<10)
	}
	if _, err := hugeBytesIn(strings.NewReader(smaps), 0x1000); err == nil {
		t.Error("a mapping not in smaps: no error")
	}
}

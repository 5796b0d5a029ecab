package dl

import (
	"fmt"
	"slices"
	"testing"
)

// TestMissingLibraryAndSymbols: a missing library is an error, and Bind
// reports missing required symbols without panicking (purego's
// RegisterLibFunc would panic on them).
func TestMissingLibraryAndSymbols(t *testing.T) {
	if _, err := Open("libdmalab-no-such-library.so.1"); err == nil {
		t.Fatal("Open of a missing library succeeded")
	}
	h, err := Open("libc.so.6")
	if err != nil {
		t.Skipf("no libc.so.6 to bind against here: %v", err)
	}
	var getpid func() int32
	var absent, optional func()
	missing := Bind(h, []Symbol{
		{Fn: &getpid, Names: []string{"dmalab_no_such_getpid", "getpid"}},
		{Fn: &absent, Names: []string{"dmalab_absent_v2", "dmalab_absent"}},
		{Fn: &optional, Names: []string{"dmalab_optional"}, Optional: true},
	})
	if !slices.Equal(missing, []string{"dmalab_absent_v2"}) {
		t.Errorf("missing = %v, want the required absent symbol's first name", missing)
	}
	if getpid == nil || getpid() <= 0 {
		t.Error("the fallback name was not bound")
	}
	if optional != nil || absent != nil {
		t.Error("a missing symbol left a non-nil function")
	}
}

// TestLoader: the environment variable overrides the default path, the
// library is opened once, and a failure is kept.
func TestLoader(t *testing.T) {
	t.Setenv("DMALAB_TEST_LIB", "override.so")
	var paths []string
	l := Loader[int]{Default: "default.so", Env: "DMALAB_TEST_LIB", Open: func(path string) (*int, error) {
		paths = append(paths, path)
		v := 7
		return &v, nil
	}}
	if l.Loaded() != nil {
		t.Fatal("Loaded before Load")
	}
	for range 2 {
		if v, err := l.Load(); err != nil || *v != 7 {
			t.Fatalf("Load = %v, %v", v, err)
		}
	}
	if !slices.Equal(paths, []string{"override.so"}) || *l.Loaded() != 7 {
		t.Fatalf("opened %v", paths)
	}
	bad := Loader[int]{Default: "missing.so", Env: "DMALAB_TEST_UNSET", Open: func(path string) (*int, error) {
		return nil, fmt.Errorf("no %s", path)
	}}
	if _, err := bad.Load(); err == nil || err.Error() != "no missing.so" || bad.Loaded() != nil {
		t.Fatalf("failed Load = %v", err)
	}
}

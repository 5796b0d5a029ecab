package html_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/report/html"
)

// A result's rows at two sizes or more give a plot of bandwidth against
// size, one per direction.
func ExampleWrite() {
	res := &report.Result{Scenario: "transfers", Platform: "h200-pcie", Results: []report.Row{
		{Path: "pinned", Direction: "h2d", Bytes: 4096, Seconds: 6.674e-6, GBps: 0.61},
		{Path: "pinned", Direction: "h2d", Bytes: 1 << 30, Seconds: 19.35e-3, GBps: 55.48},
	}}
	path := filepath.Join(os.TempDir(), "dmalab-example.html")
	f, err := os.Create(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.Remove(path)
	if err := html.Write(f, &html.Page{Title: "dmalab run transfers", Result: res}); err != nil {
		fmt.Println(err)
	}
	f.Close()
	b, _ := os.ReadFile(path)
	fmt.Println(strings.Count(string(b), "<svg"), "plot:", strings.Contains(string(b), "Bandwidth against size, host to device"))
	// Output: 1 plot: true
}

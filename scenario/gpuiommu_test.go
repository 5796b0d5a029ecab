package scenario

import (
	"errors"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/platform"
)

// translatedSmall are small runs of every scenario, as
// TestEveryScenarioOnEveryPreset has them.
var translatedSmall = map[string][]string{
	"gpudirect":        {"sizes=4KiB,1MiB"},
	"transfers":        {"sizes=64KiB,4MiB"},
	"host-memory":      {"size=4MiB"},
	"dma-streaming":    {"packets=100"},
	"dma-vs-memcpy":    {"sizes=1KiB,64KiB"},
	"um-prefetch":      {"size=8MiB", "kernels=2"},
	"um-oversubscribe": {"vram=64MiB", "ratios=0.5,1.5"},
	"iommu-attack":     {"dmas=500"},
	"iommu-modes":      {"packets=200", "rates=100"},
}

// misuse are the scenarios that commit bugs on purpose; the IOMMU
// classes are expected only from iommu-attack's device.
var misuse = map[string]bool{"dma-bugs": true, "gpu-bugs": true, "iommu-attack": true}

// TestScenariosBehindIOMMU: with platform.iommu.mode=strict and =lazy,
// every scenario runs on every preset that has an IOMMU profile whenever
// it runs with the IOMMU off (GPUs now behind it too), and the correct
// programs stay clean: no diagnostic at all, and no IOMMU fault,
// permission fault or IOVA leak from the misuse scenarios but
// iommu-attack (whose device attacks). A preset without a profile
// refuses the mode as bad input.
//
// dma-bugs is let off running: behind the NICs' IOMMU its bugs stop it
// before the GPU is involved (strict: sync-sg-count's dma_map_sg of a
// 4-entry sg list in one page fails; lazy: stale-read's device read
// through a write-only mapping faults), as they did before GPUs were
// translated.
func TestScenariosBehindIOMMU(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario on every platform twice")
	}
	for _, p := range platform.Presets() {
		for _, s := range All() {
			t.Run(p+"/"+s.Name, func(t *testing.T) {
				_, offErr := Run(s, Options{Platform: p, Sets: translatedSmall[s.Name]})
				for _, mode := range []string{platform.IOMMUStrict, platform.IOMMULazy} {
					sets := append([]string{"platform.iommu.mode=" + mode}, translatedSmall[s.Name]...)
					out, err := Run(s, Options{Platform: p, Sets: sets, Check: true})
					switch {
					case err != nil && s.Name == "dma-bugs":
						continue
					case err != nil && !errors.Is(err, ErrUsage):
						t.Errorf("%s: %v", mode, err)
						continue
					case err != nil && strings.Contains(err.Error(), "needs the hardware's profile"):
						continue // zynq-7000: no IOMMU to turn on
					case err != nil && offErr == nil:
						t.Errorf("%s: %v; it runs with the IOMMU off", mode, err)
						continue
					case err != nil:
						continue
					}
					for _, d := range out.Check.Diagnostics {
						if s.Name == "camera-pipeline" && d.Class == "cacheline-overlap" {
							// DMA-API debug's own warning for a dma-buf that a
							// writing importer and the display both map
							// (TestCameraPipelineCheck), IOMMU or not.
							continue
						}
						if s.Name == "gpudirect" && d.Class == "gpudirect-iommu-translating" {
							// The scenario tries GPUDirect whatever the IOMMU
							// does and shows nvidia_p2p's refusal; the pack
							// says why (TestGPUDirectBehindIOMMU).
							continue
						}
						iommuClass := strings.HasPrefix(d.Class, "iommu-") || d.Class == "iova-leak"
						if !misuse[s.Name] || (iommuClass && s.Name != "iommu-attack") {
							t.Errorf("%s: %s: %s", mode, d.Class, d.Message)
							break
						}
					}
				}
			})
		}
	}
}

package dmalab

import (
	"strings"

	"github.com/dmalab/dmalab/report"
)

// recordPlatformSets writes a run's --set platform.<path>=<value>
// changes into its result: each as a param under its --set key, so that
// a saved document names the platform it ran on and re-running with its
// params reproduces it, and into the source of every factor of the
// changed component ("--set platform.gpus.gpu0.link.gen=4; calibrated
// ... Gen5 ..."), since a factor measured on the unchanged platform may
// no longer hold.
func recordPlatformSets(r *report.Result, sets [][2]string) {
	for _, kv := range sets {
		path, value := kv[0], kv[1]
		r.Params["platform."+path] = value
		// Factor keys name a component without its list: "gpu0.link.efficiency"
		// for gpus.gpu0.link.*, "fabric.cross_traffic" for fabric.cross_traffic.
		p := path
		for _, list := range []string{"gpus.", "switches.", "devices."} {
			p = strings.TrimPrefix(p, list)
		}
		for k, f := range r.Factors {
			component := strings.TrimSuffix(k, "efficiency")
			if p == k || strings.HasPrefix(p, k+".") || strings.HasSuffix(k, ".link.efficiency") && strings.HasPrefix(p, component) {
				f.Source = "--set platform." + path + "=" + value + "; " + f.Source
				r.Factors[k] = f
			}
		}
	}
}

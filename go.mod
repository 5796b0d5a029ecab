module github.com/dmalab/dmalab

go 1.26.8

require (
	github.com/ebitengine/purego v0.11.3
	gopkg.in/yaml.v3 v3.0.1
)

require golang.org/x/sys v0.50.0

module github.com/dmalab/dmalab

go 1.26.8

require github.com/ebitengine/purego v0.11.3

require golang.org/x/sys v0.50.0

require go.yaml.in/yaml/v3 v3.0.4

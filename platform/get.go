package platform

import (
	"fmt"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// Get returns the value at path (a --set path, as Set takes) as a
// platform file writes it: a parameter's value without its source, ""
// for a field left out (its default). Calibration reports old values
// with it.
func Get(s *Spec, path string) (string, error) {
	n, t, _, err := walkPath(encodeSpec(s), path)
	if err != nil {
		return "", fmt.Errorf("get %s: %w", path, err)
	}
	if rt, ok := t.(reflect.Type); ok && rt.Implements(paramType) && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "value" {
				return n.Content[i+1].Value, nil
			}
		}
		return "", nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("get %s: %w: not a value", path, ErrBadPath)
	}
	return n.Value, nil
}

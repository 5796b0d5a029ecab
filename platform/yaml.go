package platform

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/dmalab/dmalab/sim"
)

// maxValues bounds the nodes one document may expand to, aliases
// included, so that a small file of aliases cannot make Parse run for
// minutes (a 300×300 distance matrix still fits).
const maxValues = 200_000

// MaxFileSize bounds a platform file: the largest preset is a few
// kilobytes, and a document of maxValues nodes fits well within it.
const MaxFileSize = 16 << 20

// Load reads a platform file. Errors name the path as given. Only a
// regular file of at most MaxFileSize is read: a device (/dev/zero), a
// FIFO or a huge file is refused before any of it is read.
func Load(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load platform: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load platform: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("load platform %s: %s, not a regular file", path, fileKind(st.Mode()))
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("load platform %s: %d bytes, larger than the %d MiB a platform file may have", path, st.Size(), MaxFileSize>>20)
	}
	// The file may grow between Stat and the read: read one byte more
	// than the bound to notice.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("load platform: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("load platform %s: larger than the %d MiB a platform file may have", path, MaxFileSize>>20)
	}
	return Parse(path, data)
}

// fileKind names what a file that is not a regular file is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}

// Parse reads a platform description in YAML and validates it. filename
// is only used in errors. The error is an *Error or, for several, an
// ErrorList; each says file:line: field: reason.
func Parse(filename string, data []byte) (*Spec, error) {
	errs := &errorList{file: filename}
	root := parseDocument(data, errs)
	if root == nil {
		return nil, errs.err()
	}
	s, lines := decodeSpec(root, errs)
	if !errs.empty() {
		return nil, errs.err()
	}
	validate(s, errs, lines)
	if !errs.empty() {
		slices.SortStableFunc(errs.errs, func(a, b *Error) int { return a.Line - b.Line })
		return nil, errs.err()
	}
	return s, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line ([0-9]+): (.*)$`)

// parseDocument parses data into its one document's root mapping.
func parseDocument(data []byte, errs *errorList) (root *yaml.Node) {
	// yaml.v3 turns its own failures into errors, but a panic on hostile
	// input must still not escape Parse.
	defer func() {
		if r := recover(); r != nil {
			errs.add(0, "", "YAML parser failed: %v", r)
			root = nil
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			errs.add(0, "", "empty document: want a mapping with name, nodes, root_complexes, ...")
		} else {
			addYAMLError(errs, data, err)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		addYAMLError(errs, data, err)
		return nil
	default:
		errs.add(extra.Line, "", "a second YAML document: a platform file holds one")
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		errs.add(0, "", "empty document: want a mapping with name, nodes, root_complexes, ...")
		return nil
	}
	root = doc.Content[0]
	if isNull(root) {
		errs.add(root.Line, "", "empty document: want a mapping with name, nodes, root_complexes, ...")
		return nil
	}
	if root.Kind != yaml.MappingNode {
		errs.add(root.Line, "", "want a mapping with name, nodes, root_complexes, ..., got %s", kindName(root))
		return nil
	}
	return root
}

// parserProblems are the messages of yaml.v3's parser (as opposed to its
// scanner). yaml.v3 reports their 0-based line, one less than the line
// the problem is on.
var parserProblems = []string{
	"did not find expected ',' or ']'", "did not find expected ',' or '}'",
	"did not find expected '-' indicator", "did not find expected key",
	"did not find expected node content", "did not find expected <document start>",
	"did not find expected <stream-start>", "found undefined tag handle",
	"found duplicate %YAML directive", "found duplicate %TAG directive",
	"found incompatible YAML document",
}

var unknownAnchor = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// addYAMLError reports a yaml.v3 error with the line it is on.
func addYAMLError(errs *errorList, data []byte, err error) {
	msg, line := strings.TrimPrefix(err.Error(), "yaml: "), 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	lines := strings.Split(string(data), "\n")
	switch {
	case slices.Contains(parserProblems, msg):
		line++
	case msg == "found a tab character that violates indentation":
		// Reported at the line before the offending one.
		for i := max(line-1, 0); i < len(lines); i++ {
			indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]
			if strings.Contains(indent, "\t") {
				line = i + 1
				break
			}
		}
	case unknownAnchor.MatchString(msg):
		// Reported without a line: find the first use of the alias.
		name := unknownAnchor.FindStringSubmatch(msg)[1]
		for i, l := range lines {
			if j := strings.Index(l, "*"+name); j >= 0 {
				rest := l[j+1+len(name):]
				if rest == "" || strings.ContainsAny(rest[:1], " ,]}\r#") {
					line = i + 1
					break
				}
			}
		}
	}
	errs.add(line, "", "malformed YAML: %s", msg)
}

// decodeSpec decodes a root mapping. lines maps every field path present
// in the document to the line of its value.
func decodeSpec(root *yaml.Node, errs *errorList) (*Spec, map[string]int) {
	d := &decoder{errs: errs, lines: map[string]int{}, budget: maxValues}
	s := new(Spec)
	d.decode(root, reflect.ValueOf(s).Elem(), "")
	return s, d.lines
}

type decoder struct {
	errs   *errorList
	lines  map[string]int
	budget int
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// decode decodes n into v, the field at path. Errors are reported at the
// line of n itself (an alias's own line, not its anchor's).
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	line := n.Line
	if d.budget--; d.budget < 0 {
		if d.budget == -1 {
			d.errs.add(line, path, "document too large: more than %d values (aliases expanded)", maxValues)
		}
		return
	}
	d.lines[path] = line
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil || n.Alias.Kind == yaml.AliasNode {
			d.errs.add(line, path, "bad alias")
			return
		}
		n = n.Alias
	}
	t := v.Type()
	switch {
	case t.Implements(paramType):
		d.param(n, v, path, line)
	case t.Kind() == reflect.Struct:
		d.mapping(n, v, path, line)
	case t.Kind() == reflect.Slice:
		d.sequence(n, v, path, line)
	default:
		d.scalar(n, v, path, line)
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// keys walks the key/value pairs of a mapping, reporting bad and
// duplicate keys, and calls f for each good one.
func (d *decoder) keys(n *yaml.Node, path string, f func(k, v *yaml.Node, kpath string)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errs.add(k.Line, path, "keys must be plain names, got %s", kindName(k))
			continue
		}
		kpath := join(path, k.Value)
		if k.Tag == "!!merge" {
			d.errs.add(k.Line, path, "merge keys (<<) are not supported: alias a whole value instead")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.errs.add(k.Line, kpath, "duplicate key (first at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		f(k, v, kpath)
	}
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string, line int) {
	if isNull(n) {
		return // "fabric:" with nothing: all defaults
	}
	if n.Kind != yaml.MappingNode {
		d.errs.add(line, path, "want a mapping, got %s", kindName(n))
		return
	}
	t := v.Type()
	d.keys(n, path, func(k, val *yaml.Node, kpath string) {
		f, ok := lookupField(t, k.Value)
		if !ok {
			hint := ""
			if c := closest(t, k.Value); c != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", c)
			}
			d.errs.add(k.Line, kpath, "unknown field%s; fields here: %s", hint, fieldNames(t))
			return
		}
		d.decode(val, v.Field(f.index), kpath)
	})
}

func (d *decoder) sequence(n *yaml.Node, v reflect.Value, path string, line int) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.errs.add(line, path, "want a list, got %s", kindName(n))
		return
	}
	if len(n.Content) == 0 {
		return // nil, as Marshal leaves out empty lists
	}
	v.Set(reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content)))
	for i, e := range n.Content {
		d.decode(e, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
}

// param decodes a Param: a bare scalar, or {value: ..., source: ...}.
func (d *decoder) param(n *yaml.Node, v reflect.Value, path string, line int) {
	if n.Kind != yaml.MappingNode {
		d.scalar(n, v.Field(0), path, line)
		return
	}
	var value *yaml.Node
	d.keys(n, path, func(k, val *yaml.Node, kpath string) {
		switch k.Value {
		case "value":
			value = val
		case "source":
			d.decode(val, v.Field(1), kpath)
		default:
			d.errs.add(k.Line, kpath, "unknown field; a parameter has value and source")
		}
	})
	if value == nil {
		d.errs.add(line, path, "missing value (want {value: ..., source: ...})")
		return
	}
	d.scalar(value, v.Field(0), path, value.Line)
}

// scalar decodes a scalar into a string, a number or a bool, by the Go
// type.
func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string, line int) {
	t := v.Type()
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode {
		d.errs.add(line, path, "want %s, got %s", what(t), kindName(n))
		return
	}
	if t.Kind() == reflect.String {
		if !isNull(n) {
			v.SetString(n.Value)
		}
		return
	}
	if isNull(n) {
		d.errs.add(line, path, "missing value: want %s", what(t))
		return
	}
	var err error
	switch t {
	case timeType:
		var x sim.Time
		x, err = sim.ParseTime(n.Value)
		v.SetInt(int64(x))
	case bytesType:
		var x Bytes
		x, err = ParseBytes(n.Value)
		v.SetInt(int64(x))
	case rateType:
		var x Rate
		x, err = ParseRate(n.Value)
		v.SetFloat(float64(x))
	default:
		switch t.Kind() {
		case reflect.Int, reflect.Int64:
			var x int64
			if x, err = parseInt(n.Value); err == nil && v.OverflowInt(x) {
				err = fmt.Errorf("bad integer %q: out of range", n.Value)
			}
			v.SetInt(x)
		case reflect.Float64:
			var x float64
			x, err = parseFloat(n.Value)
			v.SetFloat(x)
		case reflect.Bool:
			var x bool
			x, err = parseBool(n.Value)
			v.SetBool(x)
		default:
			panic("platform: no YAML decoding for " + t.String())
		}
	}
	if err != nil {
		d.errs.add(line, path, "%v", err)
	}
}
